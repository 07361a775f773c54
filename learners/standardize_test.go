package learners

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// Next scales each input by the mean and population standard deviation of
// the inputs before it, computed in one batch here, clipped to ±5, exactly
// as Apply does before it; a constant coordinate passes through; the
// statistics round-trip exactly; sparse inputs (counting nothing) and other
// dimensions are refused.
func TestStandardizerMatchesBatchStatistics(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	const d = 3
	s, err := NewStandardizer(d)
	if err != nil {
		t.Fatal(err)
	}
	var seen [][]float64
	for n := 0; n < 200; n++ {
		raw := []float64{1e10 + 1e8*r.NormFloat64(), -3 + 0.01*r.NormFloat64(), 1} // huge, tiny, a bias
		x := mustDense(t, raw)
		pure, err := s.Apply(x)
		if err != nil {
			t.Fatal(err)
		}
		z, err := s.Next(x)
		if err != nil {
			t.Fatal(err)
		}
		for i := range d {
			want := raw[i]
			if n > 0 {
				var mean, v float64
				for _, p := range seen {
					mean += p[i]
				}
				mean /= float64(n)
				for _, p := range seen {
					v += (p[i] - mean) * (p[i] - mean) / float64(n)
				}
				if v > 0 {
					want = (raw[i] - mean) / math.Sqrt(v)
				}
			}
			want = max(-StandardizeClip, min(StandardizeClip, want))
			if got := z.At(i); math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) || pure.At(i) != got {
				t.Fatalf("input %d coordinate %d: Next %v, Apply %v, batch statistics give %v", n, i, got, pure.At(i), want)
			}
		}
		seen = append(seen, raw)
	}
	b, _ := s.MarshalBinary()
	c, _ := NewStandardizer(d)
	if err := c.UnmarshalBinary(b); err != nil || c.Seen() != 200 {
		t.Fatalf("round trip: %v, %d seen", err, c.Seen())
	}
	x := mustDense(t, []float64{1e10, -3, 1})
	z1, _ := s.Apply(x)
	z2, _ := c.Apply(x)
	for i := range d {
		if z1.At(i) != z2.At(i) {
			t.Fatal("restored statistics scale differently")
		}
	}
	if err := c.UnmarshalBinary(b[:len(b)-1]); err == nil {
		t.Fatal("a cut snapshot was accepted")
	}
	sp, _ := NewSparse(d, []int32{1}, []float64{2})
	if _, err := s.Next(sp); !errors.Is(err, ErrParam) || s.Seen() != 200 {
		t.Fatalf("sparse input: %v, %d seen", err, s.Seen())
	}
	if _, err := s.Apply(mustDense(t, []float64{1, 2})); !errors.Is(err, ErrDimension) {
		t.Fatalf("wrong dimension: %v", err)
	}
}
