package learners

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// winnowSum returns r = Σ wᵢxᵢ, checking that x ∈ [0,1]ⁿ (boolean: {0,1}ⁿ),
// the domain of the multiplicative learners. The check is a separate tight
// loop so that the sum can use the vectorized dot product.
func winnowSum(w []float64, x Vector, boolean bool) (float64, error) {
	for k, v := range x.val {
		// On [0,1], v(1−v) = 0 iff v ∈ {0,1}: one predictable branch instead of two random ones.
		if !(v >= 0 && v <= 1) || (boolean && v*(1-v) != 0) {
			i := k
			if x.idx != nil {
				i = int(x.idx[k])
			}
			if boolean {
				return 0, fmt.Errorf("x[%d] = %v: this learner needs Boolean inputs (0 or 1): %w", i, v, ErrDomain)
			}
			return 0, fmt.Errorf("x[%d] = %v: this learner needs inputs in [0,1] (use complemented attributes 1−x for negative weights): %w", i, v, ErrDomain)
		}
	}
	return dot(w, x), nil
}

// multiplicative applies wᵢ ← wᵢ·α^{±xᵢ} to the active attributes, with
// demotions floored at floor. α^x is computed as exp(x·ln α), except that
// x = 1 multiplies or divides by α exactly, so that learners agree bit for bit
// on Boolean inputs.
func multiplicative(w []float64, x Vector, alpha, lnAlpha float64, promote bool, floor float64) {
	for k, v := range x.val {
		if v == 0 {
			continue
		}
		i := k
		if x.idx != nil {
			i = int(x.idx[k])
		}
		var nw float64
		switch {
		case promote && v == 1:
			nw = w[i] * alpha
		case promote:
			nw = w[i] * math.Exp(v*lnAlpha)
		case v == 1:
			nw = w[i] / alpha
		default:
			nw = w[i] * math.Exp(-v*lnAlpha)
		}
		if nw < floor { // weights are finite and positive: no NaN case, unlike math.Max
			nw = floor
		}
		w[i] = nw
	}
}

// Winnow2Params configures `winnow2` (docs/spec/ALGORITHMS.md §4.1).
type Winnow2Params struct {
	Alpha        float64  `json:"alpha" doc:"promotion factor α > 1"`
	Theta        *float64 `json:"theta,omitempty" def:"n/2" doc:"threshold θ > 0: predict 1 iff Σwᵢxᵢ ≥ θ"`
	W0           float64  `json:"w0" doc:"initial weight w₀ > 0"`
	DemoteToZero bool     `json:"demote_to_zero" doc:"Winnow1: demotion sets weights to 0 instead of dividing by α"`
}

// winnow2 is Littlestone's Winnow2 on x ∈ [0,1]ⁿ: on a mistake the weights of
// active attributes are multiplied (promotion) or divided (demotion) by α^{xᵢ}.
// It is the no-floor baseline of the tracking learners.
type winnow2 struct {
	meta
	alwaysDecide
	alpha, lnAlpha, theta float64
	toZero                bool
	w                     []float64
	version               uint64
}

func newWinnow2(p *Winnow2Params, cfg Config) (Learner, error) {
	m, err := newMeta("winnow2", cfg, p)
	if err != nil {
		return nil, err
	}
	theta := float64(cfg.Dim) / 2
	if p.Theta != nil {
		theta = *p.Theta
	}
	switch {
	case !(p.Alpha > 1) || !finite(p.Alpha):
		return nil, paramError(m.name, "alpha", p.Alpha, "must be finite and > 1")
	case !(theta > 0) || !finite(theta):
		return nil, paramError(m.name, "theta", theta, "must be finite and > 0")
	case !(p.W0 > 0) || !finite(p.W0):
		return nil, paramError(m.name, "w0", p.W0, "must be finite and > 0")
	}
	w := make([]float64, cfg.Dim)
	for i := range w {
		w[i] = p.W0
	}
	return &winnow2{meta: m, alpha: p.Alpha, lnAlpha: math.Log(p.Alpha), theta: theta, toZero: p.DemoteToZero, w: w, version: 1}, nil
}

func (l *winnow2) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	r, err := winnowSum(l.w, x, false)
	if err != nil {
		return Prediction{}, err
	}
	return labelPrediction(r-l.theta, l.version), checkMargin(r)
}

func (l *winnow2) Learn(x Vector, y int, p Prediction) error {
	p, err := current(l, l.version, x, y, p)
	if err != nil {
		return err
	}
	if p.Label == y {
		return nil
	}
	if y < 0 && l.toZero {
		x.Entries(func(i int, v float64) {
			if v > 0 {
				l.w[i] = 0
			}
		})
	} else {
		multiplicative(l.w, x, l.alpha, l.lnAlpha, y > 0, 0)
	}
	l.version++
	return nil
}

func (l *winnow2) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.f64s(l.w)
	return e.b, nil
}

func (l *winnow2) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version, w := d.u64(), d.f64s(l.dim)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.w = version, w
	return nil
}

// TrackingWinnowParams configures `tracking-winnow` (docs/spec/ALGORITHMS.md §4.2). Left
// unset, α, ε and the initial weight follow Mesterharm's Theorem 1 tuning.
type TrackingWinnowParams struct {
	Delta   float64  `json:"delta" doc:"target margin δ ∈ (0,1]; sets α = 1+δ and ε = δ/(50λ) unless they are given"`
	Lambda  *float64 `json:"lambda,omitempty" def:"n" doc:"λ ≥ max‖x‖₁ over the stream (n is always valid for x ∈ [0,1]ⁿ; smaller λ tightens the bound)"`
	Alpha   *float64 `json:"alpha,omitempty" def:"1+delta" doc:"promotion factor α > 1 (α < e keeps the weight cap of Lemma 6)"`
	Epsilon *float64 `json:"epsilon,omitempty" def:"delta/(50·lambda)" doc:"weight floor ε ∈ (0, 1/λ); also the initial weight"`
	WInit   *float64 `json:"w_init,omitempty" def:"epsilon" doc:"initial weight (Mesterharm: ε; other values only for comparisons with Winnow2)"`
	// Transform selects the instance transformation of §4.2.
	Transform          int     `json:"transform" doc:"instance transformation: 0 none, 1 deterministic (x ≤ m/2 → 0, x ≤ m → m), 2 randomized (x < m → m with probability x/m, else 0)"`
	M                  float64 `json:"m,omitempty" doc:"transformation threshold m > 0, the new smallest nonzero value (Corollary 8: δ/v); required with transform"`
	TransformOnlyHeavy bool    `json:"transform_only_heavy" doc:"transform only attributes whose weight exceeds 1/m"`
}

// trackingWinnow is Mesterharm's tracking Winnow (2003): Winnow with threshold
// 1 whose demotions never push a weight below ε. The floor bounds how far a
// weight must climb back when an attribute becomes relevant again, which is
// what makes the mistake bound grow with the number of concept shifts instead
// of with the stream length.
type trackingWinnow struct {
	meta
	alpha, lnAlpha, eps float64
	transform           int
	m                   float64
	heavyOnly           bool
	w                   []float64
	randSource
	promotions int
	demotions  int
	version    uint64
}

func newTrackingWinnow(p *TrackingWinnowParams, cfg Config) (Learner, error) {
	mt, err := newMeta("tracking-winnow", cfg, p)
	if err != nil {
		return nil, err
	}
	if !(p.Delta > 0 && p.Delta <= 1) {
		return nil, paramError(mt.name, "delta", p.Delta, "must be in (0, 1]")
	}
	lambda := float64(cfg.Dim)
	if p.Lambda != nil {
		lambda = *p.Lambda
	}
	if !(lambda > 0) || !finite(lambda) {
		return nil, paramError(mt.name, "lambda", lambda, "must be finite and > 0")
	}
	alpha, eps := 1+p.Delta, p.Delta/(50*lambda)
	if p.Alpha != nil {
		alpha = *p.Alpha
	}
	if p.Epsilon != nil {
		eps = *p.Epsilon
	}
	winit := eps
	if p.WInit != nil {
		winit = *p.WInit
	}
	switch {
	case !(alpha > 1) || !finite(alpha):
		return nil, paramError(mt.name, "alpha", alpha, "must be finite and > 1")
	case !(eps > 0) || eps*lambda >= 1:
		return nil, paramError(mt.name, "epsilon", eps, fmt.Sprintf("must be in (0, 1/λ) = (0, %g): otherwise an instance of irrelevant attributes can force a mistake forever", 1/lambda))
	case !(winit >= eps) || !finite(winit):
		return nil, paramError(mt.name, "w_init", winit, fmt.Sprintf("must be finite and ≥ ε = %g", eps))
	case p.Transform < 0 || p.Transform > 2:
		return nil, paramError(mt.name, "transform", p.Transform, "must be 0 (none), 1 (deterministic) or 2 (randomized)")
	case p.Transform != 0 && !(p.M > 0 && p.M <= 1):
		return nil, paramError(mt.name, "m", p.M, "must be in (0, 1] when transform is on")
	case p.Transform == 0 && (p.M != 0 || p.TransformOnlyHeavy):
		return nil, paramError(mt.name, "m", p.M, "m and transform_only_heavy need transform 1 or 2")
	}
	w := make([]float64, cfg.Dim)
	for i := range w {
		w[i] = winit
	}
	l := &trackingWinnow{meta: mt, alpha: alpha, lnAlpha: math.Log(alpha), eps: eps, transform: p.Transform,
		m: p.M, heavyOnly: p.TransformOnlyHeavy, w: w, version: 1}
	l.seed(cfg)
	return l, nil
}

// transformed applies the instance transformation to x, drawing transformation-2
// uniforms from src (one per attribute with 0 < xᵢ < m, in increasing i).
// It returns x unchanged when no transformation is configured.
func (l *trackingWinnow) transformed(x Vector, src *rand.PCG) (Vector, int) {
	if l.transform == 0 {
		return x, 0
	}
	r := rand.New(src)
	draws := 0
	out := Vector{dim: x.dim, idx: x.idx, val: make([]float64, len(x.val))}
	for k, v := range x.val {
		i := k
		if x.idx != nil {
			i = int(x.idx[k])
		}
		if !(v > 0 && v < l.m) || (l.heavyOnly && l.w[i] <= 1/l.m) { // NaN passes through to validation
			out.val[k] = v
			continue
		}
		switch l.transform {
		case 1:
			if v > l.m/2 {
				out.val[k] = l.m
			} // else 0
		case 2:
			draws++
			if r.Float64() < v/l.m {
				out.val[k] = l.m
			}
		}
	}
	return out, draws
}

func (l *trackingWinnow) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	xh, draws := x, 0
	if l.transform != 0 {
		src := l.src // transformation 2 draws from a copy: Predict changes nothing
		xh, draws = l.transformed(x, &src)
	}
	r, err := winnowSum(l.w, xh, false)
	if err != nil {
		return Prediction{}, err
	}
	p := labelPrediction(r-1, l.version)
	p.rng0, p.draws = l.src, draws
	return p, checkMargin(r)
}

// Decide consumes the transformation-2 draws the prediction used.
func (l *trackingWinnow) Decide(p Prediction) Prediction {
	for i := 0; i < p.draws; i++ {
		l.draws().Float64()
	}
	p.Query = true
	return p
}

func (l *trackingWinnow) Learn(x Vector, y int, p Prediction) error {
	p, err := current(l, l.version, x, y, p)
	if err != nil {
		return err
	}
	if p.Label == y {
		return nil
	}
	xh := x
	if l.transform != 0 {
		src := p.rng0 // the same x̂ the prediction saw
		xh, _ = l.transformed(x, &src)
	}
	multiplicative(l.w, xh, l.alpha, l.lnAlpha, y > 0, l.eps)
	if y > 0 {
		l.promotions++
	} else {
		l.demotions++
	}
	l.version++
	return nil
}

func (l *trackingWinnow) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.int(l.promotions)
	e.int(l.demotions)
	e.rng(&l.src)
	e.f64s(l.w)
	return e.b, nil
}

func (l *trackingWinnow) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version, pr, de, src := d.u64(), d.int(), d.int(), d.rng()
	w := d.f64s(l.dim)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.promotions, l.demotions, l.src, l.w = version, pr, de, src, w
	return nil
}

// SwinParams configures `swin` (docs/spec/ALGORITHMS.md §4.3).
type SwinParams struct {
	Alpha      float64  `json:"alpha" doc:"update factor α > 1 (1.32 with β = 0.0269 is the tuning when only n is known)"`
	Beta       float64  `json:"beta" doc:"total floor mass β ∈ [0, ln α/(α−1)): every weight stays ≥ β/n"`
	W0         *float64 `json:"w0,omitempty" def:"beta/n" doc:"initial weight w₀ ≥ β/n, > 0"`
	Randomized bool     `json:"randomized" doc:"predict 1 with probability p(r) and update whenever p(r) ≠ y (one uniform per round)"`
}

// swin is Auer and Warmuth's Shifting Winnow for tracking the best disjunction
// over Boolean inputs, as reconstructed in docs/spec/ALGORITHMS.md §4.3: Winnow with weights
// floored at β/n so that a literal switched off long ago can be switched back
// on in few mistakes, deterministic (threshold θ_det) or randomized (predict 1
// with probability p_rand(r), a ramp from β to L = ln α/(α−1)).
type swin struct {
	meta
	alpha, beta, floor float64
	lnAlpha, ell       float64 // L = ln α/(α−1)
	thetaDet           float64
	randomized         bool
	w                  []float64
	randSource
	version uint64
}

func newSwin(p *SwinParams, cfg Config) (Learner, error) {
	m, err := newMeta("swin", cfg, p)
	if err != nil {
		return nil, err
	}
	n := float64(cfg.Dim)
	if !(p.Alpha > 1) || !finite(p.Alpha) {
		return nil, paramError(m.name, "alpha", p.Alpha, "must be finite and > 1")
	}
	ell := math.Log(p.Alpha) / (p.Alpha - 1)
	if !(p.Beta >= 0 && p.Beta < ell) {
		return nil, paramError(m.name, "beta", p.Beta, fmt.Sprintf("must be in [0, ln α/(α−1)) = [0, %.4f)", ell))
	}
	w0 := p.Beta / n
	if p.W0 != nil {
		w0 = *p.W0
	}
	if !(w0 > 0) || w0 < p.Beta/n || !finite(w0) {
		return nil, paramError(m.name, "w0", w0, fmt.Sprintf("must be finite, > 0 and ≥ β/n = %g", p.Beta/n))
	}
	w := make([]float64, cfg.Dim)
	for i := range w {
		w[i] = w0
	}
	l := &swin{meta: m, alpha: p.Alpha, beta: p.Beta, floor: p.Beta / n, lnAlpha: math.Log(p.Alpha), ell: ell,
		thetaDet: SwinThetaDet(p.Alpha, p.Beta), randomized: p.Randomized, w: w, version: 1}
	l.seed(cfg)
	return l, nil
}

// SwinThetaDet is the deterministic Shifting Winnow threshold
// θ_det = (α ln α + β(α−1))/(α² − 1).
func SwinThetaDet(alpha, beta float64) float64 {
	return (alpha*math.Log(alpha) + beta*(alpha-1)) / (alpha*alpha - 1)
}

// prob is p(r): the randomized ramp, or the deterministic step at θ_det.
func (l *swin) prob(r float64) float64 {
	if !l.randomized {
		if r >= l.thetaDet {
			return 1
		}
		return 0
	}
	switch {
	case r <= l.beta:
		return 0
	case r >= l.ell:
		return 1
	}
	return (r - l.beta) / (l.ell - l.beta)
}

func (l *swin) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	r, err := winnowSum(l.w, x, true)
	if err != nil {
		return Prediction{}, err
	}
	if err := checkMargin(r); err != nil {
		return Prediction{}, err
	}
	pr := l.prob(r)
	score := r - l.thetaDet
	if l.randomized {
		score = pr - 0.5
	}
	return Prediction{Label: sign(score), Score: score, Prob: pr, QueryProb: 1, stamp: l.version}, nil
}

// Decide draws the randomized prediction: exactly one uniform per round.
func (l *swin) Decide(p Prediction) Prediction {
	if l.randomized {
		if l.draws().Float64() < p.Prob {
			p.Label = 1
		} else {
			p.Label = -1
		}
	}
	p.Query = true
	return p
}

func (l *swin) Learn(x Vector, y int, p Prediction) error {
	p, err := current(l, l.version, x, y, p)
	if err != nil {
		return err
	}
	// Update whenever the mistake probability is nonzero, independent of the draw.
	if (y > 0 && p.Prob < 1) || (y < 0 && p.Prob > 0) {
		multiplicative(l.w, x, l.alpha, l.lnAlpha, y > 0, l.floor)
		l.version++
	}
	return nil
}

func (l *swin) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.rng(&l.src)
	e.f64s(l.w)
	return e.b, nil
}

func (l *swin) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version, src := d.u64(), d.rng()
	w := d.f64s(l.dim)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.src, l.w = version, src, w
	return nil
}
