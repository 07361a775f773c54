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
// scratch of at least 4d.
func (r *rls) mulDense(x, q, acc []float64) {
	d := r.d
	acc = acc[:4*d]
	clear(acc)
	full := d - d%4 // terms from here on go to the first sum
	at := 0
	for i := 0; i < d; i++ {
		xi := x[i]
		li := 0
		if i < full {
			li = i & 3
		}
		row := r.p[at : at+d-i] // Pᵢᵢ … Pᵢ,d−1
		at += d - i
		ai := (*[4]float64)(acc[4*i:])
		ai[li] += float64(row[0] * xi)
		// Row i, terms j > i, in their sums; and each Pᵢⱼ's term i of row j.
		j := i + 1
		for ; j < full && j&3 != 0; j++ {
			v := row[j-i]
			ai[j&3] += float64(v * x[j])
			acc[4*j+li] += float64(v * xi)
		}
		a0, a1, a2, a3 := ai[0], ai[1], ai[2], ai[3]
		for ; j+4 <= full; j += 4 {
			v := row[j-i : j-i+4 : j-i+4]
			xs := x[j : j+4 : j+4]
			a0 += float64(v[0] * xs[0])
			a1 += float64(v[1] * xs[1])
			a2 += float64(v[2] * xs[2])
			a3 += float64(v[3] * xs[3])
			cs := acc[4*j : 4*j+16 : 4*j+16]
			cs[li] += float64(v[0] * xi)
			cs[4+li] += float64(v[1] * xi)
			cs[8+li] += float64(v[2] * xi)
			cs[12+li] += float64(v[3] * xi)
		}
		for ; j < d; j++ { // the tail: the first sum
			v := row[j-i]
			a0 += float64(v * x[j])
			acc[4*j+li] += float64(v * xi)
		}
		ai[0], ai[1], ai[2], ai[3] = a0, a1, a2, a3
	}
	for k := 0; k < d; k++ {
		a := (*[4]float64)(acc[4*k:])
		q[k] = (a[1] + a[3]) + (a[0] + a[2])
	}
}

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
