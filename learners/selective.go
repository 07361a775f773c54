package learners

import (
	"math"
	"math/rand/v2"
)

// sampler is the randomized query rule shared by the selective samplers of
// ALGORITHMS §5.3: query with probability s/(s + |p̂|), drawing exactly one
// uniform per round when the scale s is finite and none when it is +∞.
type sampler struct {
	scale float64
	src   rand.PCG
	rng   *rand.Rand
}

func (s *sampler) init(scale float64, cfg Config) {
	s.scale, s.src = scale, rngFor(cfg.Seed, cfg.Key)
	s.rng = rand.New(&s.src)
}

// prob is the query probability for margin m.
func (s *sampler) prob(m float64) float64 {
	if math.IsInf(s.scale, 1) {
		return 1
	}
	return s.scale / (s.scale + math.Abs(m))
}

// Decide draws the query decision for p.
func (s *sampler) Decide(p Prediction) Prediction {
	if math.IsInf(s.scale, 1) {
		p.Query = true
		return p
	}
	p.Query = s.rng.Float64() < p.QueryProb
	return p
}

func checkScale(learner, name string, v Real) error {
	if !v.positive() {
		return paramError(learner, name, float64(v), "must be > 0 (or \"inf\" to query every label)")
	}
	return nil
}

// PerceptronSSParams configures `perceptron-ss`.
type PerceptronSSParams struct {
	B Real `json:"b" doc:"query scale b > 0: query with probability b/(b+|w·x|); \"inf\" queries always (the Perceptron)"`
}

// perceptronSS is the selective-sampling Perceptron of Cesa-Bianchi, Gentile
// and Zaniboni (2006): it asks for a label with probability b/(b + |w·x|), so
// confident predictions rarely cost a label, and updates on queried mistakes.
type perceptronSS struct {
	meta
	sampler
	w       []float64
	version uint64
}

func newPerceptronSS(p *PerceptronSSParams, cfg Config) (Learner, error) {
	m, err := newMeta("perceptron-ss", cfg, p)
	if err != nil {
		return nil, err
	}
	if err := checkScale(m.name, "b", p.B); err != nil {
		return nil, err
	}
	l := &perceptronSS{meta: m, w: make([]float64, cfg.Dim), version: 1}
	l.sampler.init(float64(p.B), cfg)
	return l, nil
}

func (l *perceptronSS) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	m := dot(l.w, x)
	if err := checkMargin(m); err != nil {
		return Prediction{}, err
	}
	p := labelPrediction(m, l.version)
	p.QueryProb = l.prob(m)
	return p, nil
}

func (l *perceptronSS) Learn(x Vector, y int, p Prediction) error {
	m, err := linearMargin(x, y, p, l.dim, l.version, func() float64 { return dot(l.w, x) })
	if err != nil {
		return err
	}
	if float64(y)*m <= 0 {
		axpy(l.w, float64(y), x)
		l.version++
	}
	return nil
}

func (l *perceptronSS) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.rng(&l.src)
	e.f64s(l.w)
	return e.b, nil
}

func (l *perceptronSS) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version := d.u64()
	var src rand.PCG
	d.rng(&src)
	w := d.f64s(l.dim)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.src, l.w = version, src, w
	return nil
}

// SOPSSParams configures `sop-ss`.
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

// secondOrderSS is `sop-ss` and `lasec-ss`: the second-order margin
// p̂ = w·x/(1+s), which includes the current x in the covariance, drives a
// randomized query rule; queried mistakes update. It pays O(d·nnz) per round
// for s (O(nnz) in diagonal form).
type secondOrderSS struct {
	meta
	sampler
	r       rls
	version uint64
}

func newSOPSS(p *SOPSSParams, cfg Config) (Learner, error) {
	m, err := newMeta("sop-ss", cfg, p)
	if err != nil {
		return nil, err
	}
	if err := checkRidge(m.name, "a", p.A); err != nil {
		return nil, err
	}
	if err := checkScale(m.name, "b", p.B); err != nil {
		return nil, err
	}
	l := &secondOrderSS{meta: m, r: newRLS(cfg.Dim, p.A, 0, p.Diagonal), version: 1}
	l.sampler.init(float64(p.B), cfg)
	return l, nil
}

func newLASECSS(p *LASECSSParams, cfg Config) (Learner, error) {
	m, err := newMeta("lasec-ss", cfg, p)
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
	if err := checkScale(m.name, "a", p.A); err != nil {
		return nil, err
	}
	l := &secondOrderSS{meta: m, r: newRLS(cfg.Dim, p.B, invC, p.Diagonal), version: 1}
	l.sampler.init(float64(p.A), cfg)
	return l, nil
}

func (l *secondOrderSS) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	ph, _ := l.r.pHat(x)
	if err := checkMargin(ph); err != nil {
		return Prediction{}, err
	}
	p := labelPrediction(ph, l.version)
	p.QueryProb = l.prob(ph)
	return p, nil
}

func (l *secondOrderSS) Learn(x Vector, y int, p Prediction) error {
	m, err := linearMargin(x, y, p, l.dim, l.version, func() float64 { ph, _ := l.r.pHat(x); return ph })
	if err != nil {
		return err
	}
	if float64(y)*m <= 0 {
		l.r.update(x, y)
		l.version++
	}
	return nil
}

func (l *secondOrderSS) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.rng(&l.src)
	l.r.encode(e)
	return e.b, nil
}

func (l *secondOrderSS) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version := d.u64()
	var src rand.PCG
	d.rng(&src)
	r := l.r.decode(d)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.src, l.r = version, src, r
	return nil
}

// BBQParams configures `bbq` and `bbq-i` (ALGORITHMS §5.4).
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
	rr := v / (1 + v)
	p := labelPrediction(wx, l.version)
	p.QueryProb = 0
	if rr > l.rho*math.Pow(float64(l.t+1), -l.kappa) {
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
	r := l.r.decode(d)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.t, l.r = version, t, r
	return nil
}
