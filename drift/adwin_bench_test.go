package drift

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// BenchmarkADWINYoungKey is what a key's default detector costs over its
// first n values (a key seen n times, as most keys are among 100,000):
// made by its Maker, fed mistakes at rate 0.2.
func BenchmarkADWINYoungKey(b *testing.B) {
	m, err := NewMaker("adwin", nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{10, 100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			xs := make([]float64, n)
			for i := range xs {
				if r.Float64() < 0.2 {
					xs[i] = 1
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				d := m.New()
				for _, x := range xs {
					d.Add(x)
				}
			}
		})
	}
}
