package kafkatest

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// recorder is a testing.TB that records the errors reported to it (from
// the broker's goroutine: behind a lock).
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Error(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmtArgs(args))
}

// reported is how many errors were reported.
func (r *recorder) reported() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs)
}

func fmtArgs(args []any) string {
	if len(args) == 1 {
		if e, ok := args[0].(error); ok {
			return e.Error()
		}
	}
	return "error"
}

// The in-process broker refuses a request below Kafka 4.0.0's minimum
// version, loudly, and serves one at it.
func TestClusterRefusesVersionsKafka4Removed(t *testing.T) {
	rec := &recorder{TB: t}
	c := Cluster(rec)
	request := func(max int16) error { // a CreateTopics request at version max
		v := kversion.Stable()
		v.SetMaxKeyVersion(kmsg.CreateTopics.Int16(), max)
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()[0]), kgo.MaxVersions(v), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		_, err = cl.Request(context.Background(), kmsg.NewPtrCreateTopicsRequest())
		return err
	}
	if err := request(1); err == nil || rec.reported() != 1 {
		t.Fatalf("CreateTopics v1: %v, %d errors reported; want refused and reported", err, rec.reported())
	}
	if err := request(2); err != nil || rec.reported() != 1 {
		t.Fatalf("CreateTopics v2: %v, %d errors reported", err, rec.reported())
	}
}
