package window

import (
	"math"
	"testing"
)

func TestAccuracy(t *testing.T) {
	a := New(4)
	for _, tc := range []struct {
		wrong bool
		want  float64
	}{{true, 0}, {false, 0.5}, {false, 2.0 / 3}, {false, 0.75}, {false, 1}, {true, 0.75}} {
		a.Add(tc.wrong)
		if got := a.Value(); math.Abs(got-tc.want) > 1e-15 {
			t.Fatalf("after %d outcomes: %v, want %v", a.Len(), got, tc.want)
		}
	}
	if New(0).Value() != 0 {
		t.Fatal("an empty window")
	}
}
