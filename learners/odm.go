package learners

import (
	"errors"
	"fmt"
	"math"
)

// ODMParams configures `odm` (docs/spec/ALGORITHMS.md §6.1) and the candidates of `dynamic-odm`.
type ODMParams struct {
	Lambda   float64 `json:"lambda" doc:"loss weight λ > 0 in f(w) = ‖w‖²/2 + λ·ℓ(w)"`
	Mu       float64 `json:"mu" doc:"weight μ > 0 of over-margin deviations (margins above 1+θ)"`
	Theta    float64 `json:"theta" doc:"insensitive half-width θ ∈ [0,1): margins in [1−θ, 1+θ] cost nothing"`
	Schedule string  `json:"schedule" doc:"step size: inv_t (η = 1/s, s = steps since the last restart), inv_t_offset (η = 1/(s+s0)) or constant (η = eta)"`
	Eta      float64 `json:"eta,omitempty" def:"0.001/λ" doc:"constant step η ∈ (0,1], with schedule=constant; stable while η·(1 + 2λ·max(1,μ)·‖x‖²/(1−θ)²) < 2, which step_guard keeps (or, at 0, every step is checked against)"`
	S0       float64 `json:"s0,omitempty" doc:"offset s₀ > 0 of schedule inv_t_offset: the first step is 1/(1+s₀), not 1"`
	// StepGuard is κ: with it a constant step adapts to the input's norm
	// instead of being refused (a normalized step, as NLMS normalizes LMS).
	StepGuard float64 `json:"step_guard" doc:"κ ∈ [0,1), with schedule=constant (the decreasing schedules ignore it): each step is min(η, κ·2/L) with L = 1 + 2λ·max(1,μ)·‖x‖²/(1−θ)², the round's curvature, so no step diverges; 0: the constant η, refused (unstable) when η·L ≥ 2"`
}

// ErrUnstable reports a constant ODM step too large for the input's scale:
// gradient descent on the round's objective would overshoot and diverge.
var ErrUnstable = errors.New("step size unstable for this input")

// defaultODMParams are the setting `backtest -experiment zhang-dodm-table`
// chooses for dynamic-odm on generated streams it never evaluates
// (experiments.TuneODM; that run fails if these drift from its choice): a
// constant step with ηλ = 1e-3 on standardized inputs, guarded (κ = 0.5) so
// that a wide or spiky input gets a smaller step, never a diverging one. The
// tuning chose λ = 64 before the guard existed (with a cap on ηλ from the
// input's width) and λ = 16 with it. The 1/s schedule of
// docs/spec/ALGORITHMS.md §6.1 starts with η = 1 on a squared loss, overshoots, and left
// D-ODM at chance level on every data set.
func defaultODMParams() ODMParams {
	return ODMParams{Lambda: 16, Mu: 0.5, Theta: 0.5, Schedule: "constant", StepGuard: 0.5}
}

// DefaultODMEtaLambda is ηλ, the constant step relative to the loss weight,
// when schedule=constant leaves eta unset: η = DefaultODMEtaLambda/λ.
const DefaultODMEtaLambda = 1e-3

func (p *ODMParams) validate(learner string) error {
	switch {
	case !(p.Lambda > 0) || !finite(p.Lambda):
		return paramError(learner, "lambda", p.Lambda, "must be finite and > 0")
	case !(p.Mu > 0) || !finite(p.Mu):
		return paramError(learner, "mu", p.Mu, "must be finite and > 0")
	case !(p.Theta >= 0 && p.Theta < 1):
		return paramError(learner, "theta", p.Theta, "must be in [0, 1)")
	}
	if p.Schedule != "constant" && p.Eta != 0 {
		return paramError(learner, "eta", p.Eta, "only used with schedule=constant")
	}
	if !(p.StepGuard >= 0 && p.StepGuard < 1) {
		return paramError(learner, "step_guard", p.StepGuard, "must be in [0, 1)")
	}
	if p.Schedule != "inv_t_offset" && p.S0 != 0 {
		return paramError(learner, "s0", p.S0, "only used with schedule=inv_t_offset")
	}
	switch p.Schedule {
	case "inv_t":
	case "inv_t_offset":
		if !(p.S0 > 0) || !finite(p.S0) {
			return paramError(learner, "s0", p.S0, "must be finite and > 0 with schedule=inv_t_offset")
		}
	case "constant":
		if !(p.Eta >= 0 && p.Eta <= 1) {
			return paramError(learner, "eta", p.Eta, "must be in (0, 1] with schedule=constant (0: 0.001/λ)")
		}
	default:
		return paramError(learner, "schedule", p.Schedule, "must be inv_t, inv_t_offset or constant")
	}
	return nil
}

// odmLoss is the optimal-margin-distribution loss of seed 003 on margin γ:
// ℓ = ([1−θ−γ]₊² + μ[γ−1−θ]₊²)/(1−θ)², penalizing both small margins and
// margins that overshoot, so the margin distribution concentrates.
type odmLoss struct{ lambda, mu, theta float64 }

func (o odmLoss) loss(gamma float64) float64 {
	lo, hi := math.Max(0, 1-o.theta-gamma), math.Max(0, gamma-1-o.theta)
	return (lo*lo + o.mu*hi*hi) / ((1 - o.theta) * (1 - o.theta))
}

// grad is g(γ) with ∇ℓ(w) = g(γ)·y·x.
func (o odmLoss) grad(gamma float64) float64 {
	lo, hi := math.Max(0, 1-o.theta-gamma), math.Max(0, gamma-1-o.theta)
	return 2 * (-lo + o.mu*hi) / ((1 - o.theta) * (1 - o.theta))
}

// odmLearner is one online ODM learner: gradient descent on f(w) = ‖w‖²/2 +
// λℓ(w), w ← (1−η)·w − η·λ·g(γ)·y·x, every round. (Seed 003's Algorithm 1 has
// a sign error, (1−η)w + ηλ∇ℓ; this is the descent step its FTRL derivation
// gives.) The shrink is lazy, so a step costs O(nnz). With 1/s steps the
// update overshoots while λ‖x‖²/(1−θ)² ≫ s, so inputs should be scaled to
// about unit norm: on raw features of norm ≈ 40 the weights diverge (the
// learner then reports a non-finite margin as an error).
type odmLearner struct {
	odmLoss
	eta   float64 // 0 for inv_t and inv_t_offset
	guard float64 // κ of StepGuard: the step is min(η, κ·2/L); 0: none
	s0    float64 // the offset of inv_t_offset (0 for inv_t)
	w     scaledVec
	s     int // steps since the last (re)start, from 1
}

// stable refuses a constant step that would diverge on x: the round's
// objective has curvature up to L = 1 + 2λ·max(1,μ)·‖x‖²/(1−θ)² along x, and
// gradient descent on it converges only while η·L < 2. Decreasing schedules
// are not checked: their steps shrink below 2/L after finitely many rounds.
func (c *odmLearner) stable(x Vector) error {
	if c.eta == 0 || c.guard > 0 {
		return nil // decreasing, or guarded: every step stays under 2/L
	}
	L := c.curvature(x)
	if c.eta*L >= 2 {
		return fmt.Errorf("η = %g with λ = %g on an input of ‖x‖² = %g: η·(1 + 2λ·max(1,μ)·‖x‖²/(1−θ)²) = %.3g ≥ 2, so the step overshoots and diverges; standardize the inputs or lower eta below %.3g: %w",
			c.eta, c.lambda, x.SquaredNorm(), c.eta*L, 2/L, ErrUnstable)
	}
	return nil
}

// curvature is L = 1 + 2λ·max(1,μ)·‖x‖²/(1−θ)², the largest curvature of
// the round's objective along x.
func (c *odmLearner) curvature(x Vector) float64 {
	return 1 + 2*c.lambda*math.Max(1, c.mu)*x.SquaredNorm()/((1-c.theta)*(1-c.theta))
}

func (c *odmLearner) step(x Vector, y int, margin float64) {
	eta := c.eta
	switch {
	case eta == 0:
		eta = 1 / (float64(c.s) + c.s0)
	case c.guard > 0:
		eta = math.Min(eta, c.guard*2/c.curvature(x))
	}
	g := c.grad(float64(y) * margin)
	c.w.scale(1 - eta)
	if g != 0 {
		c.w.add(-eta*c.lambda*g*float64(y), x)
	}
	c.s++
}

// objective is fₜ(w) = ‖w‖²/2 + λℓ(w; x, y) at margin w·x.
func (c *odmLearner) objective(y int, margin float64) float64 {
	return c.w.sqNorm()/2 + c.lambda*c.loss(float64(y)*margin)
}

func (c *odmLearner) encode(e *encoder) {
	e.int(c.s)
	c.w.encode(e)
}

func (c *odmLearner) decode(d *decoder, dim int) odmLearner {
	out := *c
	out.s = d.int()
	out.w = c.w.decode(d, dim)
	return out
}

// newODMLearner starts a candidate at w = 0; norm asks for ‖w‖ tracking (the
// Dynamic ODM weights need fₜ(w) = ‖w‖²/2 + λℓ).
func newODMLearner(p *ODMParams, d int, norm bool) odmLearner {
	eta := 0.0
	if p.Schedule == "constant" {
		eta = p.Eta
		if eta == 0 {
			eta = DefaultODMEtaLambda / p.Lambda
		}
	}
	return odmLearner{odmLoss: odmLoss{p.Lambda, p.Mu, p.Theta}, eta: eta, guard: p.StepGuard, s0: p.S0, w: newScaledVec(d, norm), s: 1}
}

// odm is the standalone online ODM learner: starts at w = 0, never restarts.
type odm struct {
	meta
	alwaysDecide
	c       odmLearner
	version uint64
}

func newODM(p *ODMParams, cfg Config) (Learner, error) {
	m, err := newMeta("odm", cfg, p)
	if err != nil {
		return nil, err
	}
	if err := p.validate(m.name); err != nil {
		return nil, err
	}
	return &odm{meta: m, c: newODMLearner(p, cfg.Dim, false), version: 1}, nil
}

func (l *odm) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	m := l.c.w.dot(x)
	if err := checkMargin(m); err != nil {
		return Prediction{}, err
	}
	return labelPrediction(m, l.version), nil
}

func (l *odm) Learn(x Vector, y int, p Prediction) error {
	m, err := linearMargin(x, y, p, l.dim, l.version, func() float64 { return l.c.w.dot(x) })
	if err != nil {
		return err
	}
	if err := l.c.stable(x); err != nil {
		return err
	}
	l.c.step(x, y, m)
	l.version++
	return nil
}

func (l *odm) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	l.c.encode(e)
	return e.b, nil
}

func (l *odm) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version := d.u64()
	c := l.c.decode(&d, l.dim)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.c = version, c
	return nil
}

// DynamicODMParams configures `dynamic-odm` (docs/spec/ALGORITHMS.md §6.2).
type DynamicODMParams struct {
	ODMParams
	Horizon    int     `json:"horizon" doc:"stream length T when known (sets N and ε); 0 = unknown"`
	Candidates int     `json:"candidates" def:"⌊log₂T⌋+1, or 20 when T is unknown" doc:"number N of restarted candidates"`
	Epochs     string  `json:"epochs" def:"doubling" doc:"restart periods: doubling (Δᵢ = 2^(i−1)) or paper (Δᵢ = max(1, ⌈2^(i−1)/√(2C)⌉))"`
	Periods    []int   `json:"periods,omitempty" def:"none" doc:"explicit restart periods Δᵢ ≥ 1, overriding candidates and epochs"`
	Epsilon    float64 `json:"epsilon" def:"√(8 ln N/T), or √(8 ln N/t) when T is unknown" doc:"learning rate ε > 0 of the exponential weights"`
	C          float64 `json:"C" doc:"bound C > 0 on the per-round objective; weights use exp(−ε·f/C)"`
	Init       string  `json:"init" doc:"restart vector: random (N(0, init_std²·I) from the learner's RNG) or zero"`
	InitStd    float64 `json:"init_std" doc:"standard deviation of random restart vectors"`
}

// dynamicODM is Dynamic ODM (seed 003): N online ODM candidates restarted on
// geometric epochs Δᵢ, mixed with exponential weights on their objectives, so
// that some candidate always has a restart horizon matching the drift rate and
// no knowledge of the drift is needed. It costs O(N·nnz) per round with
// init=zero (restarts clear only what the epoch wrote); the default random
// restart draws d normals, O(d) per restart, about 2d per round over all
// candidates — use init=zero for high-dimensional sparse streams.
type dynamicODM struct {
	meta
	alwaysDecide
	cands   []odmLearner
	periods []int
	logBeta []float64
	eps     float64 // fixed ε, or 0 for √(8 ln N/t)
	c       float64
	zero    bool
	std     float64
	t       int // rounds learned
	randSource
	version uint64
}

func newDynamicODM(p *DynamicODMParams, cfg Config) (Learner, error) {
	m, err := newMeta("dynamic-odm", cfg, p)
	if err != nil {
		return nil, err
	}
	if err := p.ODMParams.validate(m.name); err != nil {
		return nil, err
	}
	if p.Horizon < 0 {
		return nil, paramError(m.name, "horizon", p.Horizon, "must be ≥ 0 (0 = unknown)")
	}
	if !(p.C > 0) || !finite(p.C) {
		return nil, paramError(m.name, "C", p.C, "must be finite and > 0")
	}
	if p.Init != "random" && p.Init != "zero" {
		return nil, paramError(m.name, "init", p.Init, "must be random or zero")
	}
	if !(p.InitStd >= 0) || !finite(p.InitStd) {
		return nil, paramError(m.name, "init_std", p.InitStd, "must be finite and ≥ 0")
	}
	periods, err := odmPeriods(p)
	if err != nil {
		return nil, fmt.Errorf("learner %s: %w", m.name, err)
	}
	n := len(periods)
	eps := p.Epsilon
	switch {
	case eps < 0 || !finite(eps):
		return nil, paramError(m.name, "epsilon", eps, "must be finite and > 0 (0 = default)")
	case eps == 0 && p.Horizon > 0:
		eps = math.Sqrt(8 * math.Log(float64(n)) / float64(p.Horizon))
	}
	l := &dynamicODM{meta: m, periods: periods, logBeta: make([]float64, n), eps: eps, c: p.C,
		zero: p.Init == "zero", std: p.InitStd, version: 1}
	l.seed(cfg)
	for i := range l.logBeta {
		l.logBeta[i] = -math.Log(float64(n))
	}
	l.cands = make([]odmLearner, n)
	for i := range l.cands {
		l.cands[i] = newODMLearner(&p.ODMParams, cfg.Dim, true)
		if l.zero {
			l.cands[i].w.lazyReset() // zero restarts cost O(writes since the last one)
		}
		l.restart(i)
	}
	return l, nil
}

// odmPeriods resolves the candidates' restart periods.
func odmPeriods(p *DynamicODMParams) ([]int, error) {
	if p.Periods != nil {
		if p.Candidates != 0 {
			return nil, fmt.Errorf("parameter candidates: set either periods or candidates: %w", ErrParam)
		}
		if len(p.Periods) == 0 || len(p.Periods) > 64 {
			return nil, fmt.Errorf("parameter periods: need 1 to 64 periods, got %d: %w", len(p.Periods), ErrParam)
		}
		for _, d := range p.Periods {
			if d < 1 {
				return nil, fmt.Errorf("parameter periods: period %d must be ≥ 1: %w", d, ErrParam)
			}
		}
		return append([]int(nil), p.Periods...), nil
	}
	n := p.Candidates
	switch {
	case n < 0 || n > 62:
		return nil, fmt.Errorf("parameter candidates = %d: must be in [1, 62] (0 = default): %w", n, ErrParam)
	case n == 0 && p.Horizon > 0:
		n = int(math.Floor(math.Log2(float64(p.Horizon)))) + 1
	case n == 0:
		n = 20
	}
	periods := make([]int, n)
	for i := range periods {
		switch p.Epochs {
		case "doubling", "":
			periods[i] = 1 << uint(i)
		case "paper":
			periods[i] = max(1, int(math.Ceil(float64(int(1)<<uint(i))/math.Sqrt(2*p.C))))
		default:
			return nil, fmt.Errorf("parameter epochs = %q: must be doubling or paper: %w", p.Epochs, ErrParam)
		}
	}
	return periods, nil
}

// restart resets candidate i to a fresh start vector (d normals, coordinate order).
func (l *dynamicODM) restart(i int) {
	c := &l.cands[i]
	c.s = 1
	c.w.reset()
	if l.zero {
		return
	}
	for j := range c.w.v {
		c.w.v[j] = l.std * l.draws().NormFloat64()
	}
	c.w.fold() // recompute ‖v‖²
}

// mix returns the normalized mixing weights βᵢ.
func (l *dynamicODM) mix() []float64 {
	b := make([]float64, len(l.logBeta))
	for i, lb := range l.logBeta {
		b[i] = math.Exp(lb)
	}
	return b
}

func (l *dynamicODM) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	m := 0.0
	for i := range l.cands {
		m += math.Exp(l.logBeta[i]) * l.cands[i].w.dot(x)
	}
	if err := checkMargin(m); err != nil {
		return Prediction{}, err
	}
	return labelPrediction(m, l.version), nil
}

func (l *dynamicODM) Learn(x Vector, y int, _ Prediction) error {
	if err := checkDim(x, l.dim); err != nil {
		return err
	}
	if err := checkLabel(y); err != nil {
		return err
	}
	if err := l.cands[0].stable(x); err != nil { // the candidates share their step
		return err
	}
	margins := make([]float64, len(l.cands))
	for i := range l.cands {
		margins[i] = l.cands[i].w.dot(x)
		if err := checkMargin(margins[i]); err != nil {
			return err
		}
	}
	l.t++
	eps := l.eps
	if eps == 0 {
		eps = math.Sqrt(8 * math.Log(float64(len(l.cands))) / float64(l.t))
	}
	// Exponential weights on each candidate's pre-update objective, in log space.
	for i := range l.cands {
		l.logBeta[i] -= eps * l.cands[i].objective(y, margins[i]) / l.c
	}
	lse := logSumExp(l.logBeta)
	for i := range l.logBeta {
		l.logBeta[i] -= lse
	}
	// Each candidate steps, or restarts when the next round is a restart point.
	for i := range l.cands {
		if l.t%l.periods[i] == 0 {
			l.restart(i)
		} else {
			l.cands[i].step(x, y, margins[i])
		}
	}
	l.version++
	return nil
}

// logSumExp is log Σ exp(vᵢ), computed stably.
func logSumExp(v []float64) float64 {
	mx := math.Inf(-1)
	for _, x := range v {
		mx = math.Max(mx, x)
	}
	s := 0.0
	for _, x := range v {
		s += math.Exp(x - mx)
	}
	return mx + math.Log(s)
}

func (l *dynamicODM) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.int(l.t)
	e.rng(&l.src)
	e.f64s(l.logBeta)
	for i := range l.cands {
		l.cands[i].encode(e)
	}
	return e.b, nil
}

func (l *dynamicODM) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version, t, src := d.u64(), d.int(), d.rng()
	logBeta := d.f64s(len(l.cands))
	cands := make([]odmLearner, len(l.cands))
	for i := range cands {
		cands[i] = l.cands[i].decode(&d, l.dim)
	}
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.t, l.src, l.logBeta, l.cands = version, t, src, logBeta, cands
	return nil
}
