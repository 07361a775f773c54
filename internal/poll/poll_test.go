package poll

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of stopping.
type recorder struct {
	testing.TB
	failed atomic.Value
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed.Store(format)
	panic(r)
}

func TestUntil(t *testing.T) {
	var n atomic.Int64
	go func() {
		time.Sleep(20 * time.Millisecond)
		n.Store(1)
	}()
	Until(t, 5*time.Second, func() bool { return n.Load() == 1 }, Text("n to be set"))

	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("Until did not fail on a condition that never holds: %v", p)
			}
		}()
		Until(r, 10*time.Millisecond, func() bool { return false }, Text("never"))
	}()
	if f, _ := r.failed.Load().(string); !strings.Contains(f, "timed out") {
		t.Fatalf("failure %q", f)
	}
}
