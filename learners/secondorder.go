package learners

import (
	"fmt"

	"gonum.org/v1/gonum/floats"
)

// rls is the shared core of the second-order learners (SOP, LASEC, their
// selective samplers and BBQ): a Kalman-filter / recursive-least-squares
// estimate w = P·v with covariance P, in the exact O(d²) covariance form of
// ALGORITHMS §5.2. Per update it applies the drift step P ← P + I/c and the
// rank-one correction −q qᵀ/(1+s) with q = (P + I/c)x, s = xᵀq; c = ∞ (invC =
// 0) gives SOP and BBQ.
//
// The full form stores P row-major and updates both triangles from the same
// product qᵢqⱼ, so P stays exactly symmetric and the periodic
// re-symmetrization of §1.4 is never needed (a test asserts it).
//
// The diagonal form keeps only pᵢ ≈ Pᵢᵢ, with the +1/c drift applied lazily as
// pᵢ = baseᵢ + (k − stampᵢ)/c, so that it costs O(nnz) per round: an
// approximation for large d, exact when every input has one nonzero.
type rls struct {
	d    int
	invC float64
	w    []float64
	k    int // updates so far

	p []float64 // full form: d×d row-major; nil in diagonal form

	base  []float64 // diagonal form
	stamp []int

	q []float64 // scratch for updates, not state
}

// newRLS starts with P = (1/ridge − 1/c)·I, so that the first drift step lands
// on I/ridge (D₁ = ridge·I + x₁x₁ᵀ as in seed 004 Lemma 1).
func newRLS(d int, ridge, invC float64, diagonal bool) rls {
	r := rls{d: d, invC: invC, w: make([]float64, d), q: make([]float64, d)}
	p0 := 1/ridge - invC
	if diagonal {
		r.base, r.stamp = make([]float64, d), make([]int, d)
		for i := range r.base {
			r.base[i] = p0
		}
		return r
	}
	r.p = make([]float64, d*d)
	for i := 0; i < d; i++ {
		r.p[i*d+i] = p0
	}
	return r
}

func (r *rls) diagonal() bool { return r.p == nil }

// pii returns the current diagonal entry i of the diagonal form.
func (r *rls) pii(i int) float64 { return r.base[i] + float64(r.k-r.stamp[i])*r.invC }

// quad returns s = xᵀ(P + I/c)x without touching any buffer, so it is safe in
// Predict: O(d·nnz) for dense x, O(nnz²) for sparse x (full form); O(nnz)
// (diagonal form).
func (r *rls) quad(x Vector) float64 {
	s := 0.0
	if r.diagonal() {
		x.Entries(func(i int, v float64) { s += (r.pii(i) + r.invC) * v * v })
		return s
	}
	d := r.d
	if x.idx == nil {
		for i, xi := range x.val {
			if xi != 0 {
				s += xi * floats.Dot(r.p[i*d:(i+1)*d], x.val)
			}
		}
	} else {
		for a, i := range x.idx {
			row := r.p[int(i)*d:]
			t := 0.0
			for b, j := range x.idx {
				t += row[j] * x.val[b]
			}
			s += x.val[a] * t
		}
	}
	return s + r.invC*x.SquaredNorm()
}

// apply fills r.q with q = (P + I/c)x and returns s = x·q (full form only).
func (r *rls) apply(x Vector) float64 {
	d, q := r.d, r.q
	if x.idx == nil {
		for i := 0; i < d; i++ {
			q[i] = floats.Dot(r.p[i*d:(i+1)*d], x.val)
		}
	} else {
		clear(q)
		for k, i := range x.idx {
			floats.AddScaled(q, x.val[k], r.p[int(i)*d:(int(i)+1)*d]) // P symmetric: column = row
		}
	}
	if r.invC != 0 {
		axpy(q, r.invC, x)
	}
	return dot(q, x)
}

// update performs the RLS step on (x, y): w ← w + ((y − w·x)/(1+s))·q and
// P ← P + I/c − q qᵀ/(1+s). It costs O(d·nnz + d²) (full) or O(nnz) (diagonal).
func (r *rls) update(x Vector, y int) {
	wx := dot(r.w, x)
	if r.diagonal() {
		s := r.quad(x)
		coef := (float64(y) - wx) / (1 + s)
		inv := 1 / (1 + s)
		x.Entries(func(i int, v float64) {
			pc := r.pii(i) + r.invC
			qi := pc * v
			r.w[i] += coef * qi
			r.base[i] = pc - qi*qi*inv
			r.stamp[i] = r.k + 1
		})
		r.k++
		return
	}
	s := r.apply(x)
	floats.AddScaled(r.w, (float64(y)-wx)/(1+s), r.q)
	inv := 1 / (1 + s)
	d, q, p := r.d, r.q, r.p
	for i := 0; i < d; i++ {
		qi := q[i]
		row := p[i*d : (i+1)*d]
		row[i] += r.invC - qi*qi*inv
		for j := i + 1; j < d; j++ {
			t := qi * q[j] * inv
			row[j] -= t
			p[j*d+i] -= t
		}
	}
	r.k++
}

func (r *rls) encode(e *encoder) {
	e.int(r.k)
	e.f64s(r.w)
	if r.diagonal() {
		e.f64s(r.base)
		e.ints(r.stamp)
		return
	}
	e.f64s(r.p)
}

// decode reads a state written by encode into a copy of r's shape.
func (r *rls) decode(d *decoder) rls {
	out := rls{d: r.d, invC: r.invC, q: r.q, k: d.int(), w: d.f64s(r.d)}
	if r.diagonal() {
		out.base, out.stamp = d.f64s(r.d), d.ints(out.k)
		if d.err == nil && len(out.stamp) != r.d {
			d.fail("diagonal stamps")
		}
		return out
	}
	out.p = d.f64s(r.d * r.d)
	return out
}

// secondOrderParams are the checks shared by the ridge parameters.
func checkRidge(learner, name string, v float64) error {
	if !(v > 0) || !finite(v) {
		return paramError(learner, name, v, "must be finite and > 0")
	}
	return nil
}

// checkDrift validates LASEC's 0 < b < c ≤ ∞ and returns 1/c.
func checkDrift(learner string, b float64, c Real) (float64, error) {
	if !(float64(c) > b) {
		return 0, paramError(learner, "c", float64(c), fmt.Sprintf("must be > b = %g (or \"inf\" for no drift)", b))
	}
	return 1 / float64(c), nil // 1/∞ = 0
}

// SOPParams configures `sop` (ALGORITHMS §5.1).
type SOPParams struct {
	A        float64 `json:"a" doc:"ridge a > 0: initial inverse covariance I/a; a → ∞ gives the Perceptron"`
	Diagonal bool    `json:"diagonal" doc:"keep only the diagonal of the covariance: O(nnz) per round and O(d) memory; an approximation for high dimension"`
}

// LASECParams configures `lasec` (ALGORITHMS §5.2).
type LASECParams struct {
	B        float64 `json:"b" doc:"ridge b > 0 (initial regularization)"`
	C        Real    `json:"c" doc:"drift c ∈ (b, ∞]: process noise I/c added per update; \"inf\" gives SOP with a = b"`
	Diagonal bool    `json:"diagonal" doc:"keep only the diagonal of the covariance (lazy +1/c): O(nnz) per round; an approximation for high dimension"`
}

// secondOrder is `sop` and `lasec`: mistake-driven RLS on the updates, with
// drift for LASEC. Predict costs O(nnz): the exposed Score is w·x, which has the
// sign of the paper's p̂ = w·x/(1+s) (the shrunk p̂ matters only for query
// rules, which the -ss variants compute).
type secondOrder struct {
	meta
	alwaysDecide
	r       rls
	version uint64
}

func newSOP(p *SOPParams, cfg Config) (Learner, error) {
	m, err := newMeta("sop", cfg, p)
	if err != nil {
		return nil, err
	}
	if err := checkRidge(m.name, "a", p.A); err != nil {
		return nil, err
	}
	return &secondOrder{meta: m, r: newRLS(cfg.Dim, p.A, 0, p.Diagonal), version: 1}, nil
}

func newLASEC(p *LASECParams, cfg Config) (Learner, error) {
	m, err := newMeta("lasec", cfg, p)
	if err != nil {
		return nil, err
	}
	if err := checkRidge(m.name, "b", p.B); err != nil {
		return nil, err
	}
	invC, err := checkDrift(m.name, p.B, p.C)
	if err != nil {
		return nil, err
	}
	return &secondOrder{meta: m, r: newRLS(cfg.Dim, p.B, invC, p.Diagonal), version: 1}, nil
}

func (l *secondOrder) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	m := dot(l.r.w, x)
	if err := checkMargin(m); err != nil {
		return Prediction{}, err
	}
	return labelPrediction(m, l.version), nil
}

func (l *secondOrder) Learn(x Vector, y int, p Prediction) error {
	m, err := linearMargin(x, y, p, l.dim, l.version, func() float64 { return dot(l.r.w, x) })
	if err != nil {
		return err
	}
	if float64(y)*m <= 0 {
		l.r.update(x, y)
		l.version++
	}
	return nil
}

func (l *secondOrder) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	l.r.encode(e)
	return e.b, nil
}

func (l *secondOrder) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version := d.u64()
	r := l.r.decode(d)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.r = version, r
	return nil
}

// pHat is the shrunk second-order margin p̂ = w·x/(1+s) and its parts.
func (r *rls) pHat(x Vector) (p, wx float64) {
	wx = dot(r.w, x)
	return wx / (1 + r.quad(x)), wx
}
