package learners

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// BenchmarkPackedProducts compares the second-order learners' products with
// the packed covariance (P·x and the rank-one update, in packed_amd64.s on
// amd64) with gonum's BLAS routines for the same packed storage (Dspmv,
// Dspr), which the issue suggested. gonum's sum in another order, so using
// them would also change every second-order learner's results in their last
// bits; this records what they would cost. (rankOne also adds 1/c to the
// diagonal, d additions that Spr does not make.)
//
//	go test -run '^$' -bench PackedProducts ./learners
func BenchmarkPackedProducts(b *testing.B) {
	for _, d := range []int{10, 50, 200} {
		r := newRLS(d, 1, 0.01, false)
		rng := rand.New(rand.NewPCG(uint64(d), 1))
		for i := range r.p {
			r.p[i] = rng.NormFloat64()
		}
		x := make([]float64, d)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		q, acc := make([]float64, d), make([]float64, 4*d)
		ap := blas64.SymmetricPacked{N: d, Uplo: blas.Upper, Data: r.p}
		xv, qv := blas64.Vector{N: d, Inc: 1, Data: x}, blas64.Vector{N: d, Inc: 1, Data: q}
		b.Run(fmt.Sprintf("mul/d=%d/driftstream", d), func(b *testing.B) {
			for b.Loop() {
				r.mulDense(x, q, acc)
			}
		})
		b.Run(fmt.Sprintf("mul/d=%d/gonum-Dspmv", d), func(b *testing.B) {
			for b.Loop() {
				blas64.Spmv(1, ap, xv, 0, qv)
			}
		})
		// The updates shrink x so that many rounds keep P finite.
		for i := range x {
			x[i] *= 1e-3
		}
		b.Run(fmt.Sprintf("update/d=%d/driftstream", d), func(b *testing.B) {
			for b.Loop() {
				r.rankOne(x, 0.5)
			}
		})
		b.Run(fmt.Sprintf("update/d=%d/gonum-Dspr", d), func(b *testing.B) {
			for b.Loop() {
				blas64.Spr(-0.5, xv, ap)
			}
		})
	}
}
