package topics

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// The exact fast path gives strconv's value, bit for bit, wherever it applies.
func TestExactMatchesStrconv(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	applied := 0
	for i := 0; i < 300000; i++ {
		v := (r.Float64() - 0.5) * float64(r.IntN(1000000))
		s := strconv.FormatFloat(v, 'f', r.IntN(12), 64)
		want, _ := strconv.ParseFloat(s, 64)
		if got, ok := exact([]byte(s)); ok {
			applied++
			if got != want {
				t.Fatalf("%s: %v, strconv %v", s, got, want)
			}
		}
	}
	if applied < 100000 {
		t.Fatalf("the fast path applied to only %d numbers", applied)
	}
}
