//go:build !noasm && !gccgo && !safe

package learners

import "gonum.org/v1/gonum/floats"

// The products with the packed covariance, on the platforms where gonum's
// floats.Dot and floats.AddScaled run its amd64 assembly. They walk the
// packed triangle in storage order and reproduce that assembly's arithmetic
// exactly, so the results are bit for bit those of the full row-major form
// (TestPackedCovarianceIsTheFullForm).

// mulDense sets q = P·x for dense x (full form). Each q[k] is summed as
// floats.Dot sums row k with x: four partial sums, term j in sum j mod 4
// (the last len mod 4 terms in the first), combined as (s1+s3) + (s0+s2);
// products are rounded before they are added (no fused multiply-add). acc is
// scratch of at least 4d, held as four lanes of d: lane l holds sum l of
// every q[k]. mulPacked fills them in one pass over the packed triangle.
func (r *rls) mulDense(x, q, acc []float64) {
	d := r.d
	acc = acc[:4*d]
	clear(acc)
	mulPacked(r.p[:packedLen(d)], x[:d], acc)
	l0, l1, l2, l3 := acc[:d:d], acc[d:2*d:2*d], acc[2*d:3*d:3*d], acc[3*d:4*d:4*d]
	for k := range q[:d] {
		q[k] = (l1[k] + l3[k]) + (l0[k] + l2[k])
	}
}

// mulPacked adds P·x, P packed by upper rows in p (d = len(x)), into the
// four lanes of sums in acc (4d, lane l at acc[l·d:]), in packed_amd64.s.
// Row i of p holds term i of rows i … d−1 (Pᵢⱼ is term i of row j, in lane
// i mod 4, or lane 0 from the last d mod 4 terms on) and row i's own terms
// j > i (term j in lane j mod 4, or lane 0); both are added in one pass over
// the row, its aligned middle two products at a time (SSE2). Every sum thus
// receives its terms in increasing j, as the full form's floats.Dot did.
//
//go:noescape
func mulPacked(p, x, acc []float64)

// addRow adds alpha times row i of P to q, as floats.AddScaled adds a full
// row: q[j] += alpha·Pᵢⱼ, the product rounded first. buf is unused here.
func (r *rls) addRow(q []float64, alpha float64, i int, buf []float64) {
	for j, at := 0, i; j < i; j++ { // Pⱼᵢ, down column i of the rows above
		q[j] += float64(alpha * r.p[at])
		at += r.d - j - 1
	}
	start := r.rowStart(i)
	floats.AddScaled(q[i:], alpha, r.p[start:start+r.d-i])
}

// rankOne applies P ← P + I/c − q qᵀ·inv to the packed triangle, each entry
// as the full form's loop computed it, Pᵢⱼ − (qᵢqⱼ)·inv, two entries at a
// time (rankOnePacked, packed_amd64.s).
func (r *rls) rankOne(q []float64, inv float64) {
	rankOnePacked(r.p[:packedLen(r.d)], q[:r.d], inv, r.invC)
}

// rankOnePacked is rankOne on p, the upper triangle of a len(q)-square
// matrix packed by rows.
//
//go:noescape
func rankOnePacked(p, q []float64, inv, invC float64)
