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

func TestMean(t *testing.T) {
	mean := NewMean(3)
	for _, tc := range []struct{ v, want float64 }{{1, 1}, {0, 0.5}, {0.5, 0.5}, {0.25, 0.25}, {2, 0.5833333333333334}, {-1, 0.4166666666666667}} {
		mean.Add(tc.v)
		if got := mean.Value(); math.Abs(got-tc.want) > 1e-12 {
			t.Fatalf("after adding %v: %v, want %v", tc.v, got, tc.want)
		}
	}
	if mean.Len() != 3 || NewMean(5).Value() != 0 {
		t.Fatal("length or empty window")
	}
	// A long stream keeps an exact sum: the mean of the last 3 of a million
	// values is theirs alone.
	for i := 0; i < 1_000_000; i++ {
		mean.Add(float64(i%7) / 7)
	}
	want := (float64(999_997%7) + float64(999_998%7) + float64(999_999%7)) / 7 / 3
	if got := mean.Value(); math.Abs(got-want) > 1e-6 {
		t.Fatalf("after a million values: %v, want %v", got, want)
	}
}
