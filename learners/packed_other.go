//go:build noasm || gccgo || safe || !amd64

package learners

import "gonum.org/v1/gonum/floats"

// The products with the packed covariance where gonum runs pure Go: each row
// is read whole into scratch and handed to floats.Dot and floats.AddScaled,
// as the full row-major form did, so the results are bit for bit its.

// mulDense sets q = P·x for dense x (full form); acc is scratch of at least d.
func (r *rls) mulDense(x, q, acc []float64) {
	row := acc[:r.d]
	for i := 0; i < r.d; i++ {
		q[i] = floats.Dot(r.row(i, row), x)
	}
}

// addRow adds alpha times row i of P to q; buf is scratch of at least d.
func (r *rls) addRow(q []float64, alpha float64, i int, buf []float64) {
	floats.AddScaled(q, alpha, r.row(i, buf[:r.d]))
}

// rankOne applies P ← P + I/c − q qᵀ·inv to the packed triangle, each entry
// as the full form's loop computed it: Pᵢⱼ − (qᵢqⱼ)·inv.
func (r *rls) rankOne(q []float64, inv float64) {
	d := r.d
	for i := 0; i < d; i++ {
		qi := q[i]
		up := r.p[r.rowStart(i) : r.rowStart(i)+d-i] // Pᵢᵢ … Pᵢ,d−1
		up[0] += r.invC - float64(float64(qi*qi)*inv)
		for j := i + 1; j < d; j++ {
			up[j-i] -= float64(float64(qi*q[j]) * inv)
		}
	}
}

// row fills buf (length d) with row i of P (full form) and returns it.
func (r *rls) row(i int, buf []float64) []float64 {
	for j, at := 0, i; j < i; j++ { // Pⱼᵢ, down column i of the rows above
		buf[j] = r.p[at]
		at += r.d - j - 1
	}
	start := r.rowStart(i)
	copy(buf[i:], r.p[start:start+r.d-i])
	return buf
}
