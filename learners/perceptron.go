package learners

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// PerceptronParams configures `perceptron`; it has none.
type PerceptronParams struct{}

// PerceptronSSParams configures `perceptron-ss`.
type PerceptronSSParams struct {
	B Real `json:"b" doc:"query scale b > 0: query with probability b/(b+|w·x|); \"inf\" queries always (the Perceptron)"`
}

// perceptron is Rosenblatt's Perceptron (docs/spec/ALGORITHMS.md §2.1), w ← w + y·x when
// y·w·x ≤ 0, and, with a finite query scale, the selective-sampling Perceptron
// of Cesa-Bianchi, Gentile and Zaniboni (2006, §5.3): it asks for a label with
// probability b/(b + |w·x|), so confident predictions rarely cost a label.
type perceptron struct {
	meta
	sampler
	w       []float64
	version uint64
}

func newPerceptron(p *PerceptronParams, cfg Config) (Learner, error) {
	return newPerceptronVariant("perceptron", p, Real(math.Inf(1)), cfg)
}

func newPerceptronSS(p *PerceptronSSParams, cfg Config) (Learner, error) {
	if err := checkScale("perceptron-ss", "b", p.B); err != nil {
		return nil, err
	}
	return newPerceptronVariant("perceptron-ss", p, p.B, cfg)
}

func newPerceptronVariant(name string, params any, scale Real, cfg Config) (Learner, error) {
	m, err := newMeta(name, cfg, params)
	if err != nil {
		return nil, err
	}
	l := &perceptron{meta: m, w: make([]float64, cfg.Dim), version: 1}
	l.sampler.init(float64(scale), cfg)
	return l, nil
}

func (l *perceptron) Predict(x Vector) (Prediction, error) {
	return l.predict(x, l.dim, l.version, func() float64 { return dot(l.w, x) })
}

// linearMargin returns p.Score when p was made against the current state, else
// recomputes it, validating x and y either way.
func linearMargin(x Vector, y int, p Prediction, dim int, version uint64, f func() float64) (float64, error) {
	if err := checkDim(x, dim); err != nil {
		return 0, err
	}
	if err := checkLabel(y); err != nil {
		return 0, err
	}
	m := p.Score
	if p.stamp != version {
		m = f()
	}
	return m, checkMargin(m)
}

func (l *perceptron) Learn(x Vector, y int, p Prediction) error {
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

func (l *perceptron) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.rng(&l.src)
	e.f64s(l.w)
	return e.b, nil
}

func (l *perceptron) UnmarshalBinary(data []byte) error {
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

// ModifiedPerceptronParams configures `modified-perceptron` (docs/spec/ALGORITHMS.md §2.2).
type ModifiedPerceptronParams struct {
	Init             string    `json:"init" doc:"first-example (w = y·x̂ on the first nonzero input), random (w = g/‖g‖, g ~ N(0,I) from the learner's RNG) or given (w0)"`
	W0               []float64 `json:"w0,omitempty" def:"none" doc:"initial weight vector for init=given; nonzero, length = dimension; normalized"`
	RenormalizeEvery int       `json:"renormalize_every" doc:"renormalize w to unit length every this many updates (0 = never); never changes a prediction"`
}

// modifiedPerceptron is the Modified Perceptron of Blum, Frieze, Kannan and
// Vempala as analysed in seed 000: a unit vector w reflected through the
// hyperplane orthogonal to x̂ on every mistake, w ← w − 2(w·x̂)x̂, which keeps
// ‖w‖ = 1 and puts the triggering example on the other side.
type modifiedPerceptron struct {
	meta
	alwaysDecide
	w          scaledVec
	started    bool
	sinceNorm  int
	renormEach int
	version    uint64
}

func newModifiedPerceptron(p *ModifiedPerceptronParams, cfg Config) (Learner, error) {
	m, err := newMeta("modified-perceptron", cfg, p)
	if err != nil {
		return nil, err
	}
	if p.RenormalizeEvery < 0 {
		return nil, paramError(m.name, "renormalize_every", p.RenormalizeEvery, "must be ≥ 0")
	}
	l := &modifiedPerceptron{meta: m, w: newScaledVec(cfg.Dim, false), renormEach: p.RenormalizeEvery, version: 1}
	switch p.Init {
	case "first-example":
		if p.W0 != nil {
			return nil, paramError(m.name, "w0", "…", "only allowed with init=given")
		}
	case "random":
		if p.W0 != nil {
			return nil, paramError(m.name, "w0", "…", "only allowed with init=given")
		}
		src := rngFor(cfg.Seed, cfg.Key)
		r := rand.New(&src)
		g := make([]float64, cfg.Dim)
		for i := range g {
			g[i] = r.NormFloat64()
		}
		if err := l.start(g); err != nil {
			return nil, err
		}
	case "given":
		if len(p.W0) != cfg.Dim {
			return nil, paramError(m.name, "w0", fmt.Sprintf("length %d", len(p.W0)), fmt.Sprintf("must have length %d (the dimension)", cfg.Dim))
		}
		for i, v := range p.W0 {
			if !finite(v) {
				return nil, paramError(m.name, "w0", fmt.Sprintf("w0[%d] = %v", i, v), "must be finite")
			}
		}
		if err := l.start(p.W0); err != nil {
			return nil, paramError(m.name, "w0", "zero vector", err.Error())
		}
	default:
		return nil, paramError(m.name, "init", p.Init, "must be one of first-example, random, given")
	}
	return l, nil
}

// start sets w = g/‖g‖.
func (l *modifiedPerceptron) start(g []float64) error {
	l.w.set(g)
	if l.w.sqn == 0 {
		return fmt.Errorf("initial vector is zero: the reflection update maps 0 to 0 forever")
	}
	l.w.s = 1 / math.Sqrt(l.w.sqn)
	l.started = true
	return nil
}

// normalizedMargin returns w·x̂ and ‖x‖ (0 when not started or x = 0).
func (l *modifiedPerceptron) normalizedMargin(x Vector) (m, norm float64) {
	norm = math.Sqrt(x.SquaredNorm())
	if norm == 0 || !l.started {
		return 0, norm
	}
	return l.w.dot(x) / norm, norm
}

func (l *modifiedPerceptron) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	m, norm := l.normalizedMargin(x)
	if err := checkMargin(m + norm); err != nil {
		return Prediction{}, err
	}
	return labelPrediction(m, l.version), nil
}

func (l *modifiedPerceptron) Learn(x Vector, y int, p Prediction) error {
	if err := checkDim(x, l.dim); err != nil {
		return err
	}
	if err := checkLabel(y); err != nil {
		return err
	}
	var m, norm float64
	if p.stamp == l.version { // fresh prediction: reuse its margin
		m, norm = p.Score, math.Sqrt(x.SquaredNorm())
	} else {
		m, norm = l.normalizedMargin(x)
	}
	if err := checkMargin(m + norm); err != nil {
		return err
	}
	if norm == 0 {
		return nil // ‖x‖ = 0: predict +1, do nothing
	}
	if !l.started {
		l.w.reset()
		l.w.addKnown(float64(y)/norm, x, 0, norm*norm) // w = y·x̂ (first-example start counts as an update)
		l.started = true
		l.version++
		return nil
	}
	if float64(y)*m > 0 {
		return nil
	}
	// Householder reflection w ← w − 2(w·x̂)x̂, with ‖v‖² updated in O(1):
	// v·x = (w·x)/s = m·‖x‖/s.
	l.w.addKnown(-2*m/norm, x, m*norm/l.w.s, norm*norm)
	l.version++
	l.sinceNorm++
	if l.renormEach > 0 && l.sinceNorm >= l.renormEach {
		l.sinceNorm = 0
		l.w.scale(1 / (l.w.s * math.Sqrt(l.w.sqn))) // ‖w‖ = s·‖v‖ = 1, O(1); folds periodically
	}
	return nil
}

func (l *modifiedPerceptron) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.bool(l.started)
	e.int(l.sinceNorm)
	l.w.encode(e)
	return e.b, nil
}

func (l *modifiedPerceptron) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version, started, since := d.u64(), d.bool(), d.int()
	w := l.w.decode(&d, l.dim)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.started, l.sinceNorm, l.w = version, started, since, w
	return nil
}

// ShiftingPerceptronParams configures `shifting-perceptron` (docs/spec/ALGORITHMS.md §2.3).
type ShiftingPerceptronParams struct {
	Lambda float64 `json:"lambda" doc:"shrink rate λ > 0: on the k-th update w ← (1 − λ/(λ+k))·w + y·x"`
}

// shiftingPerceptron is the Shifting Perceptron of Cavallanti, Cesa-Bianchi and
// Gentile (2007): on a mistake it shrinks w by 1 − λ/(λ+k) before adding y·x,
// so old updates fade and the learner can follow a moving target.
type shiftingPerceptron struct {
	meta
	alwaysDecide
	lambda  float64
	w       scaledVec
	k       int
	version uint64
}

func newShiftingPerceptron(p *ShiftingPerceptronParams, cfg Config) (Learner, error) {
	m, err := newMeta("shifting-perceptron", cfg, p)
	if err != nil {
		return nil, err
	}
	if !(p.Lambda > 0) || !finite(p.Lambda) {
		return nil, paramError(m.name, "lambda", p.Lambda, "must be finite and > 0")
	}
	return &shiftingPerceptron{meta: m, lambda: p.Lambda, w: newScaledVec(cfg.Dim, false), version: 1}, nil
}

func (l *shiftingPerceptron) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	m := l.w.dot(x)
	if err := checkMargin(m); err != nil {
		return Prediction{}, err
	}
	return labelPrediction(m, l.version), nil
}

func (l *shiftingPerceptron) Learn(x Vector, y int, p Prediction) error {
	m, err := linearMargin(x, y, p, l.dim, l.version, func() float64 { return l.w.dot(x) })
	if err != nil {
		return err
	}
	if float64(y)*m <= 0 {
		lk := l.lambda / (l.lambda + float64(l.k))
		l.w.scale(1 - lk) // shrink first (λ₀ = 1 clears w), then add
		l.w.add(float64(y), x)
		l.k++
		l.version++
	}
	return nil
}

func (l *shiftingPerceptron) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.int(l.k)
	l.w.encode(e)
	return e.b, nil
}

func (l *shiftingPerceptron) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version, k := d.u64(), d.int()
	w := l.w.decode(&d, l.dim)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.k, l.w = version, k, w
	return nil
}

// BudgetPerceptronParams configures `budget-perceptron` (docs/spec/ALGORITHMS.md §2.4).
type BudgetPerceptronParams struct {
	Budget         int  `json:"budget" doc:"B ≥ 1: at most B stored update examples; w is always their signed sum"`
	EvictAmongAll  bool `json:"evict_among_all" doc:"add the newcomer first and evict uniformly among all B+1 (Foundry variant); default replaces one of the B stored (DOGMA)"`
	RecomputeEvery int  `json:"recompute_every" doc:"recompute w from the store every this many evictions to shed rounding (0 = never)"`
}

// budgetPerceptron is the Randomized Budget Perceptron of Cavallanti et al.
// (2007): a Perceptron that keeps at most B support examples and, when full,
// forgets a uniformly chosen one, which both bounds memory and tracks drift.
type budgetPerceptron struct {
	meta
	alwaysDecide
	budget    int
	amongAll  bool
	recompute int
	w         []float64
	xs        []Vector
	ys        []int
	evictions int
	randSource
	version uint64
}

func newBudgetPerceptron(p *BudgetPerceptronParams, cfg Config) (Learner, error) {
	m, err := newMeta("budget-perceptron", cfg, p)
	if err != nil {
		return nil, err
	}
	if p.Budget < 1 {
		return nil, paramError(m.name, "budget", p.Budget, "must be ≥ 1")
	}
	if p.RecomputeEvery < 0 {
		return nil, paramError(m.name, "recompute_every", p.RecomputeEvery, "must be ≥ 0")
	}
	l := &budgetPerceptron{meta: m, budget: p.Budget, amongAll: p.EvictAmongAll, recompute: p.RecomputeEvery,
		w: make([]float64, cfg.Dim), version: 1}
	l.seed(cfg)
	return l, nil
}

func (l *budgetPerceptron) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	m := dot(l.w, x)
	if err := checkMargin(m); err != nil {
		return Prediction{}, err
	}
	return labelPrediction(m, l.version), nil
}

func (l *budgetPerceptron) Learn(x Vector, y int, p Prediction) error {
	m, err := linearMargin(x, y, p, l.dim, l.version, func() float64 { return dot(l.w, x) })
	if err != nil {
		return err
	}
	if float64(y)*m > 0 {
		return nil
	}
	l.version++
	switch {
	case len(l.xs) < l.budget:
		l.xs = append(l.xs, x.clone())
		l.ys = append(l.ys, y)
	case l.amongAll:
		r := l.draws().IntN(l.budget + 1)
		l.evictions++
		if r == l.budget {
			return nil // the newcomer itself is evicted: w unchanged
		}
		l.evict(r, x, y)
	default:
		l.evictions++
		l.evict(l.draws().IntN(l.budget), x, y)
	}
	axpy(l.w, float64(y), x)
	if l.recompute > 0 && l.evictions > 0 && l.evictions%l.recompute == 0 && len(l.xs) == l.budget {
		l.recomputeW()
	}
	return nil
}

// evict replaces stored example r by (x, y) and removes its contribution.
func (l *budgetPerceptron) evict(r int, x Vector, y int) {
	axpy(l.w, -float64(l.ys[r]), l.xs[r])
	l.xs[r], l.ys[r] = x.clone(), y
}

// recomputeW sets w = Σ_S y·x exactly from the store, in slot order.
func (l *budgetPerceptron) recomputeW() {
	clear(l.w)
	for s, xs := range l.xs {
		axpy(l.w, float64(l.ys[s]), xs)
	}
}

func (l *budgetPerceptron) MarshalBinary() ([]byte, error) {
	e := l.headerAt(3) // its stored inputs changed layout in version 3
	e.u64(l.version)
	e.int(l.evictions)
	e.rng(&l.src)
	e.f64s(l.w)
	e.int(len(l.xs))
	for s, x := range l.xs {
		e.int(l.ys[s])
		e.b, _ = x.AppendBinary(e.b) // a Vector's encoding cannot fail
	}
	return e.b, nil
}

func (l *budgetPerceptron) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version, evictions, src := d.u64(), d.int(), d.rng()
	w := d.f64s(l.dim)
	n := d.length(l.budget)
	xs, ys := make([]Vector, 0, n), make([]int, 0, n)
	for s := 0; s < n && d.err() == nil; s++ {
		y := d.int()
		if y != 1 && y != -1 {
			d.fail("stored label")
		}
		ys = append(ys, y)
		if d.version < 3 {
			xs = append(xs, d.vecV2(l.dim))
		} else {
			xs = append(xs, d.vecV3(l.dim))
		}
	}
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.evictions, l.src, l.w, l.xs, l.ys = version, evictions, src, w, xs, ys
	return nil
}
