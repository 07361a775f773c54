package learners

import (
	"math"
	"testing"
)

// NonFinite finds the first NaN or ±Inf wherever it stands.
func TestNonFinite(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name      string
		vals      []float64
		nonFinite int
	}{
		{"empty", nil, -1},
		{"finite", []float64{0, -3, 2.5, math.MaxFloat64, math.Copysign(0, -1)}, -1},
		{"NaN inside", []float64{1, 2, 3, nan, 5}, 3},
		{"+Inf first", []float64{inf, 1}, 0},
		{"-Inf last", []float64{1, -7, -inf}, 2},
		{"NaN after Inf", []float64{-2, inf, nan}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NonFinite(tc.vals); got != tc.nonFinite {
				t.Errorf("NonFinite = %d, want %d", got, tc.nonFinite)
			}
			if _, err := NewDense(tc.vals); (err != nil) != (tc.nonFinite >= 0) {
				t.Errorf("NewDense: %v", err)
			}
		})
	}
}

// The checks every pipeline event pays on a 1,000-value input.
func BenchmarkVectorChecks(b *testing.B) {
	vals := make([]float64, 1000)
	for i := range vals {
		vals[i] = float64(i%17) - 8.5
	}
	x := Vector{dim: len(vals), val: vals}
	b.Run("SquaredNorm", func(b *testing.B) { // the pipeline's learning guard
		for b.Loop() {
			if x.SquaredNorm() <= 0 {
				b.Fatal("norm")
			}
		}
	})
	b.Run("largest-by-Entries", func(b *testing.B) { // the guard it replaced
		for b.Loop() {
			big := 0.0
			x.Entries(func(_ int, v float64) { big = max(big, math.Abs(v)) })
			if big != 8.5 {
				b.Fatal("largest")
			}
		}
	})
	b.Run("NonFinite", func(b *testing.B) {
		for b.Loop() {
			if NonFinite(vals) >= 0 {
				b.Fatal("finite values")
			}
		}
	})
}
