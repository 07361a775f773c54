package learners

import (
	"fmt"
	"math"
	"sync"

	"gonum.org/v1/gonum/floats"
)

// rls is the shared core of the second-order learners (SOP, LASEC, their
// selective samplers and BBQ): a Kalman-filter / recursive-least-squares
// estimate w = P·v with covariance P, in the exact O(d²) covariance form of
// docs/spec/ALGORITHMS.md §5.2. Per update it applies the drift step P ← P + I/c and the
// rank-one correction −q qᵀ/(1+s) with q = (P + I/c)x, s = xᵀq; c = ∞ (invC =
// 0) gives SOP and BBQ.
//
// The full form stores only the upper triangle of P, packed row by row
// (d(d+1)/2 values, half the d² of a full matrix): P is symmetric, each
// update changes Pᵢⱼ and Pⱼᵢ by the same product qᵢqⱼ, so the re-
// symmetrization of §1.4 is never needed. Products with P (mulDense,
// addRow) sum in the order the full row-major form's gonum calls summed, and
// the update (rankOne) rounds each entry as the full form's loop did, so the
// results are bit for bit those of the full form; on amd64 mulDense and
// rankOne are assembly (packed_amd64.s), elsewhere Go (packed_other.go).
//
// The diagonal form keeps only pᵢ ≈ Pᵢᵢ, with the +1/c drift applied lazily as
// pᵢ = baseᵢ + (k − stampᵢ)/c, so that it costs O(nnz) per round: an
// approximation for large d, exact when every input has one nonzero.
type rls struct {
	d    int
	invC float64
	w    []float64
	k    int // updates so far

	p []float64 // full form: P's upper triangle, packed by rows; nil in diagonal form

	base  []float64 // diagonal form
	stamp []int
}

// packedLen is the length of a packed d×d upper triangle.
func packedLen(d int) int { return d * (d + 1) / 2 }

// newRLS starts with P = (1/ridge − 1/c)·I, so that the first drift step lands
// on I/ridge (D₁ = ridge·I + x₁x₁ᵀ as in seed 004 Lemma 1).
func newRLS(d int, ridge, invC float64, diagonal bool) rls {
	r := rls{d: d, invC: invC, w: make([]float64, d)}
	p0 := 1/ridge - invC
	if diagonal {
		r.base, r.stamp = make([]float64, d), make([]int, d)
		for i := range r.base {
			r.base[i] = p0
		}
		return r
	}
	r.p = make([]float64, packedLen(d))
	for i := 0; i < d; i++ {
		r.p[r.rowStart(i)] = p0
	}
	return r
}

func (r *rls) diagonal() bool { return r.p == nil }

// rowStart is where row i's upper part, Pᵢᵢ … Pᵢ,d−1, starts in p.
func (r *rls) rowStart(i int) int { return i*r.d - i*(i-1)/2 }

// at returns Pᵢⱼ (full form).
func (r *rls) at(i, j int) float64 {
	if i > j {
		i, j = j, i
	}
	return r.p[r.rowStart(i)+j-i]
}

// scratch lends d-float buffers for the products with P: the learners of a
// worker's keys share them rather than each holding its own.
var scratch = sync.Pool{New: func() any { return new([]float64) }}

// borrow returns a buffer of n floats from scratch; give it back with
// scratch.Put.
func borrow(n int) *[]float64 {
	b := scratch.Get().(*[]float64)
	if cap(*b) < n {
		*b = make([]float64, n)
	}
	*b = (*b)[:n]
	return b
}

// pii returns the current diagonal entry i of the diagonal form.
func (r *rls) pii(i int) float64 { return r.base[i] + float64(r.k-r.stamp[i])*r.invC }

// quad returns s = xᵀ(P + I/c)x without changing the state, so it is safe in
// Predict: O(d·nnz) for dense x, O(nnz²) for sparse x (full form); O(nnz)
// (diagonal form).
func (r *rls) quad(x Vector) float64 {
	s := 0.0
	if r.diagonal() {
		x.Entries(func(i int, v float64) { s += (r.pii(i) + r.invC) * v * v })
		return s
	}
	if x.idx == nil {
		buf := borrow(5 * r.d)
		q := (*buf)[:r.d]
		r.mulDense(x.val, q, (*buf)[r.d:])
		for i, xi := range x.val {
			if xi != 0 {
				s += xi * q[i] // xᵢ·(row i · x)
			}
		}
		scratch.Put(buf)
	} else {
		for a, i := range x.idx {
			t := 0.0
			for b, j := range x.idx {
				t += r.at(int(i), int(j)) * x.val[b]
			}
			s += x.val[a] * t
		}
	}
	return s + r.invC*x.SquaredNorm()
}

// apply fills q with q = (P + I/c)x and returns s = x·q (full form only);
// acc is scratch of length 4d.
func (r *rls) apply(x Vector, q, acc []float64) float64 {
	if x.idx == nil {
		r.mulDense(x.val, q, acc)
	} else {
		clear(q)
		for k, i := range x.idx {
			r.addRow(q, x.val[k], int(i), acc) // P symmetric: column = row
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
	d := r.d
	buf := borrow(5 * d)
	q, acc := (*buf)[:d], (*buf)[d:]
	s := r.apply(x, q, acc)
	floats.AddScaled(r.w, (float64(y)-wx)/(1+s), q)
	r.rankOne(q, 1/(1+s))
	scratch.Put(buf)
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

// decode reads a state written by encode into a copy of r's shape. Format 1
// snapshots hold the full d×d matrix: its upper triangle is kept.
func (r *rls) decode(d *decoder) rls {
	out := rls{d: r.d, invC: r.invC, k: d.int(), w: d.f64s(r.d)}
	if r.diagonal() {
		out.base, out.stamp = d.f64s(r.d), d.ints(out.k)
		if d.err() == nil && len(out.stamp) != r.d {
			d.fail("diagonal stamps")
		}
		return out
	}
	if d.version == 1 {
		full := d.f64s(r.d * r.d)
		if d.err() != nil {
			return out
		}
		out.p = make([]float64, packedLen(r.d))
		for i := 0; i < r.d; i++ {
			copy(out.p[out.rowStart(i):], full[i*r.d+i:(i+1)*r.d])
		}
		return out
	}
	out.p = d.f64s(packedLen(r.d))
	return out
}

// checkRidge validates a ridge (initial regularization) parameter.
func checkRidge(learner, name string, v float64) error {
	if !(v > 0) || !finite(v) {
		return paramError(learner, name, v, "must be finite and > 0")
	}
	return nil
}

// SOPParams configures `sop` (docs/spec/ALGORITHMS.md §5.1).
type SOPParams struct {
	A        float64 `json:"a" doc:"ridge a > 0: initial inverse covariance I/a; a → ∞ gives the Perceptron"`
	Diagonal bool    `json:"diagonal" doc:"keep only the diagonal of the covariance: O(nnz) per round and O(d) memory; an approximation for high dimension"`
}

// LASECParams configures `lasec` (docs/spec/ALGORITHMS.md §5.2).
type LASECParams struct {
	B        float64 `json:"b" doc:"ridge b > 0 (initial regularization)"`
	C        Real    `json:"c" doc:"drift c ∈ (b, ∞]: process noise I/c added per update; \"inf\" gives SOP with a = b"`
	Diagonal bool    `json:"diagonal" doc:"keep only the diagonal of the covariance (lazy +1/c): O(nnz) per round; an approximation for high dimension"`
}

// SOPSSParams configures `sop-ss` (docs/spec/ALGORITHMS.md §5.3).
type SOPSSParams struct {
	A        float64 `json:"a" doc:"ridge a > 0"`
	B        Real    `json:"b" doc:"query scale b > 0: query with probability b/(b+|p̂|); \"inf\" gives SOP"`
	Diagonal bool    `json:"diagonal" doc:"diagonal covariance approximation for high dimension"`
}

// LASECSSParams configures `lasec-ss` (seed 004, Fig. 1).
type LASECSSParams struct {
	B        float64 `json:"b" doc:"ridge b > 0"`
	C        Real    `json:"c" doc:"drift c ∈ (b, ∞]; \"inf\" gives SOP-SS"`
	A        Real    `json:"a" doc:"query scale a > 0: query with probability a/(a+|p̂|); \"inf\" gives LASEC"`
	Diagonal bool    `json:"diagonal" doc:"diagonal covariance approximation for high dimension"`
}

// secondOrder is the mistake-driven second-order family: `sop` (Cesa-Bianchi,
// Conconi, Gentile 2005), `lasec` (Moroshko, Crammer 2014: SOP whose covariance
// grows by I/c per update, so it keeps adapting under drift) and their
// selective samplers `sop-ss` and `lasec-ss`.
//
// The supervised learners expose Score = w·x, which costs O(nnz) and has the
// sign of the paper's p̂ = w·x/(1+s). The samplers expose p̂ itself, whose
// magnitude drives the query rule, and pay O(d·nnz) per round for s.
type secondOrder struct {
	meta
	sampler
	shrunk  bool // Score = p̂ (samplers) rather than w·x
	r       rls
	version uint64
}

func newSOP(p *SOPParams, cfg Config) (Learner, error) {
	if err := checkRidge("sop", "a", p.A); err != nil {
		return nil, err
	}
	return newSecondOrder("sop", p, cfg, p.A, Real(math.Inf(1)), p.Diagonal, false, Real(math.Inf(1)))
}

func newLASEC(p *LASECParams, cfg Config) (Learner, error) {
	if err := checkRidge("lasec", "b", p.B); err != nil {
		return nil, err
	}
	return newSecondOrder("lasec", p, cfg, p.B, p.C, p.Diagonal, false, Real(math.Inf(1)))
}

func newSOPSS(p *SOPSSParams, cfg Config) (Learner, error) {
	if err := checkRidge("sop-ss", "a", p.A); err != nil {
		return nil, err
	}
	if err := checkScale("sop-ss", "b", p.B); err != nil {
		return nil, err
	}
	return newSecondOrder("sop-ss", p, cfg, p.A, Real(math.Inf(1)), p.Diagonal, true, p.B)
}

func newLASECSS(p *LASECSSParams, cfg Config) (Learner, error) {
	if err := checkRidge("lasec-ss", "b", p.B); err != nil {
		return nil, err
	}
	if err := checkScale("lasec-ss", "a", p.A); err != nil {
		return nil, err
	}
	return newSecondOrder("lasec-ss", p, cfg, p.B, p.C, p.Diagonal, true, p.A)
}

func newSecondOrder(name string, params any, cfg Config, ridge float64, c Real, diagonal, shrunk bool, scale Real) (Learner, error) {
	m, err := newMeta(name, cfg, params)
	if err != nil {
		return nil, err
	}
	if !(float64(c) > ridge) {
		return nil, paramError(name, "c", float64(c), fmt.Sprintf("must be > b = %g (or \"inf\" for no drift)", ridge))
	}
	l := &secondOrder{meta: m, shrunk: shrunk,
		r: newRLS(cfg.Dim, ridge, 1/float64(c), diagonal), version: 1}
	l.sampler.init(float64(scale), cfg)
	return l, nil
}

// margin is the exposed score: p̂ for the samplers, w·x otherwise.
func (l *secondOrder) margin(x Vector) float64 {
	wx := dot(l.r.w, x)
	if !l.shrunk {
		return wx
	}
	return wx / (1 + l.r.quad(x))
}

func (l *secondOrder) Predict(x Vector) (Prediction, error) {
	return l.predict(x, l.dim, l.version, func() float64 { return l.margin(x) })
}

func (l *secondOrder) Learn(x Vector, y int, p Prediction) error {
	m, err := linearMargin(x, y, p, l.dim, l.version, func() float64 { return l.margin(x) })
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
	e.rng(&l.src)
	l.r.encode(e)
	return e.b, nil
}

func (l *secondOrder) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version, src := d.u64(), d.rng()
	r := l.r.decode(&d)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.src, l.r = version, src, r
	return nil
}

// BBQParams configures `bbq` and `bbq-i` (docs/spec/ALGORITHMS.md §5.4).
type BBQParams struct {
	Kappa float64 `json:"kappa" doc:"κ ∈ [0,1]: query when r = xᵀ(A+xxᵀ)⁻¹x exceeds ρ·t^−κ; larger κ queries more"`
	A     float64 `json:"a" doc:"ridge a > 0: A starts at a·I"`
	Rho   float64 `json:"rho" doc:"threshold factor ρ ≥ 0 (DOGMA uses 0.5; 0 queries every round with x ≠ 0)"`
}

// bbq is Bound-on-Bias Query (Cesa-Bianchi, Gentile, Orabona 2009): a
// deterministic sampler that asks for a label while the RLS estimate is still
// uncertain in x's direction. BBQ-I (seed 004) updates only on queried
// mistakes, so it keeps querying and adapts better after a drift.
type bbq struct {
	meta
	onlyMistakes bool
	kappa, rho   float64
	r            rls
	t            int // rounds decided so far
	version      uint64
}

func newBBQ(p *BBQParams, cfg Config) (Learner, error)  { return newBBQVariant("bbq", false, p, cfg) }
func newBBQI(p *BBQParams, cfg Config) (Learner, error) { return newBBQVariant("bbq-i", true, p, cfg) }

func newBBQVariant(name string, onlyMistakes bool, p *BBQParams, cfg Config) (Learner, error) {
	m, err := newMeta(name, cfg, p)
	if err != nil {
		return nil, err
	}
	if !(p.Kappa >= 0 && p.Kappa <= 1) {
		return nil, paramError(name, "kappa", p.Kappa, "must be in [0, 1]")
	}
	if err := checkRidge(name, "a", p.A); err != nil {
		return nil, err
	}
	if !(p.Rho >= 0) || !finite(p.Rho) {
		return nil, paramError(name, "rho", p.Rho, "must be finite and ≥ 0")
	}
	return &bbq{meta: m, onlyMistakes: onlyMistakes, kappa: p.Kappa, rho: p.Rho, r: newRLS(cfg.Dim, p.A, 0, false), version: 1}, nil
}

func (l *bbq) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	wx := dot(l.r.w, x)
	v := l.r.quad(x)
	if err := checkMargin(wx + v); err != nil {
		return Prediction{}, err
	}
	p := labelPrediction(wx, l.version)
	p.QueryProb = 0
	if v/(1+v) > l.rho*math.Pow(float64(l.t+1), -l.kappa) {
		p.QueryProb = 1
	}
	return p, nil
}

// Decide advances the round counter t and queries deterministically.
func (l *bbq) Decide(p Prediction) Prediction {
	l.t++
	p.Query = p.QueryProb == 1
	return p
}

func (l *bbq) Learn(x Vector, y int, p Prediction) error {
	m, err := linearMargin(x, y, p, l.dim, l.version, func() float64 { return dot(l.r.w, x) })
	if err != nil {
		return err
	}
	if !l.onlyMistakes || float64(y)*m <= 0 {
		l.r.update(x, y)
		l.version++
	}
	return nil
}

func (l *bbq) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.int(l.t)
	l.r.encode(e)
	return e.b, nil
}

func (l *bbq) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version, t := d.u64(), d.int()
	r := l.r.decode(&d)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.t, l.r = version, t, r
	return nil
}
