package learners

import (
	"encoding/json"
	"fmt"
	"math"
)

// LogRegParams configures `logreg`.
type LogRegParams struct {
	Eta float64 `json:"eta" doc:"base step η > 0: coordinate i moves by η·gᵢ/√Gᵢ, Gᵢ its decayed sum of squared slopes"`
	L2  float64 `json:"l2" doc:"L2 penalty ≥ 0 on the weights of the coordinates an input touches (0: none)"`
	// Decay below 1 forgets old gradients, so that steps stay large enough
	// to follow a drifting concept (AdaGrad's shrink as 1/√t).
	Decay float64 `json:"decay" doc:"in (0, 1]: each touch multiplies a coordinate's accumulator Gᵢ by it before adding gᵢ² (1: AdaGrad, whose steps shrink as 1/√t; below 1, RMSProp-like steps that keep tracking a drift)"`
	// Slow and Select weigh two step sizes by measurement, online: a fast
	// copy of the weights follows drift, a slow one averages out label
	// noise, and the learner predicts by their mix weighted by their
	// recent errors (Weigh).
	Slow   float64 `json:"slow" doc:"in [0, 1): a second copy of the weights steps by slow·η·gᵢ/max(√Gᵢ, |gᵢ|) (Gᵢ the fast copy's accumulator, gᵢ the slow copy's slope: no step beyond slow·η), and the learner predicts by the two copies' margins weighted by exponential weights on their recent losses (0: one copy, the fast)"`
	Select float64 `json:"select" doc:"in (0, 1): each label multiplies the copies' running loss difference by it before adding its own (the weights' horizon is about 1/(1−select) labels)"`
	// Weigh names the loss the copies are weighed by. Their errors by
	// default: by log loss the copies came out nearly even on old keys of
	// a stationary stream, where the fast one errs more but its larger
	// weights are surer where it is right (docs/LEARNING.md).
	Weigh string `json:"weigh" doc:"the loss whose running difference weighs the two copies: \"errors\" (each copy's mistakes, 1 per wrong sign, 1/2 at a margin of 0) or \"logloss\" (log(1 + e^(−y·m)), the first two-step learner's weighing)"`
	// Prior keeps the shape of a young learner's inputs: without it the
	// first step moves every touched coordinate by η whatever its value.
	Prior float64 `json:"prior" doc:"≥ 0: at the learner's first label every accumulator Gᵢ starts at prior times the mean of that label's gᵢ² over the input's entries, so that the first steps follow the input's shape (as plain gradient steps do) instead of moving every touched coordinate by η; the start fades as the accumulators decay (0: none)"`
}

// The values of Weigh.
const (
	weighErrors  = "errors"
	weighLogLoss = "logloss"
)

// MarshalJSON writes the parameters, which name the learner's state (its
// identity), leaving out each parameter added since snapshots were written
// when it has the value those snapshots' learner had: Slow 0 (with Select
// and Weigh, which it makes moot), Weigh "logloss" and Prior 0. So the
// one-step learner's and the first two-step learner's checkpoints stay
// valid under the parameters that give those learners.
func (p LogRegParams) MarshalJSON() ([]byte, error) {
	w := struct {
		Eta    float64  `json:"eta"`
		L2     float64  `json:"l2"`
		Decay  float64  `json:"decay"`
		Slow   *float64 `json:"slow,omitempty"`
		Select *float64 `json:"select,omitempty"`
		Weigh  string   `json:"weigh,omitempty"`
		Prior  float64  `json:"prior,omitempty"`
	}{Eta: p.Eta, L2: p.L2, Decay: p.Decay, Prior: p.Prior}
	if p.Slow != 0 {
		w.Slow, w.Select = &p.Slow, &p.Select
		if p.Weigh != weighLogLoss {
			w.Weigh = p.Weigh
		}
	}
	return json.Marshal(w)
}

// logreg is online logistic regression with per-coordinate adaptive steps
// (AdaGrad: Duchi, Hazan, Singer, JMLR 2011; the per-coordinate rates of
// McMahan et al., Ad click prediction, KDD 2013). It minimizes the log loss
// log(1 + e^(−y·w·x)) one label at a time: with g = −y·σ(−y·m) the loss's
// slope at the margin m, coordinate i of x takes gᵢ = g·xᵢ + l2·wᵢ, adds gᵢ²
// to its accumulator Gᵢ (first multiplied by decay) and moves by −η·gᵢ/√Gᵢ.
// With decay 1 it is AdaGrad, whose steps shrink as 1/√t and stop following
// a drift; below 1 the accumulator forgets (RMSProp, Tieleman and Hinton
// 2012) and the steps stay near η·√(1−decay). It learns from every label,
// right or wrong, and its margin is a log-odds: Posterior is σ(w·x).
//
// Two step sizes (Slow > 0, the default): no one step suits every stream —
// on a fast-drifting real stream large steps win by points, on a slowly
// drifting noisy one small steps do (docs/LEARNING.md). So the learner keeps
// a second, slow copy ws of the weights, stepping by Slow·η on the fast
// copy's accumulators (over its own slope where that is larger, so that no
// slow step exceeds Slow·η), and a running difference D of the two copies'
// losses (D ← Select·D + loss(fast) − loss(slow) at each label; the loss is
// Weigh's: by default each copy's errors, 1 for a wrong sign). Its margin
// is a·(w·x) + (1−a)·(ws·x) with a = σ(−D): exponential weights on the
// copies' recent losses (Hedge's weights, forgetting at Select), 1/2 each
// on a fresh learner. Each copy learns at its own margin:
// the model's margin with this learner's mixed margin replaced by the
// copy's (alone, the copy's own; within a sum of parts, the other parts'
// plus the copy's).
//
// A start for the first steps (Prior > 0, the default): at the first label
// every Gᵢ starts at Prior·mean(gⱼ²) over the input's entries, one scale
// for all coordinates, so that the first steps keep the input's shape, as
// plain gradient steps do (exactly so as Prior grows; without a start every
// touched coordinate moves by η), and become per-coordinate as each Gᵢ
// fills with its own slopes and the start decays away.
//
// It is beyond the five papers: the baseline a user would otherwise pick
// (River's LogisticRegression), in the catalog so that the service's keys
// can be it.
type logreg struct {
	meta
	alwaysDecide
	eta, l2, decay float64
	w, g2          []float64
	version        uint64

	// The slow copy (nil when Slow is 0): its weights, its step factor
	// Slow·η, the weights' forgetting, the running loss difference D and
	// the fast copy's weight σ(−D), kept with it.
	ws                []float64
	slowEta, selDecay float64
	lossDiff, fastW   float64
	byErrors          bool // Weigh "errors"
	prior             float64
}

func newLogReg(p *LogRegParams, cfg Config) (Learner, error) {
	if !(p.Eta > 0) || math.IsInf(p.Eta, 1) {
		return nil, paramError("logreg", "eta", p.Eta, "must be finite and > 0")
	}
	if !(p.L2 >= 0) || math.IsInf(p.L2, 1) {
		return nil, paramError("logreg", "l2", p.L2, "must be finite and ≥ 0")
	}
	if !(p.Decay > 0 && p.Decay <= 1) {
		return nil, paramError("logreg", "decay", p.Decay, "must be in (0, 1]")
	}
	if !(p.Slow >= 0 && p.Slow < 1) {
		return nil, paramError("logreg", "slow", p.Slow, "must be in [0, 1)")
	}
	if !(p.Select > 0 && p.Select < 1) {
		return nil, paramError("logreg", "select", p.Select, "must be in (0, 1)")
	}
	if p.Weigh != weighErrors && p.Weigh != weighLogLoss {
		return nil, paramError("logreg", "weigh", p.Weigh, `must be "errors" or "logloss"`)
	}
	if !(p.Prior >= 0) || math.IsInf(p.Prior, 1) {
		return nil, paramError("logreg", "prior", p.Prior, "must be finite and ≥ 0")
	}
	m, err := newMeta("logreg", cfg, p)
	if err != nil {
		return nil, err
	}
	d, copies := cfg.Dim, 2 // w and G, and with a slow copy its weights: one allocation
	if p.Slow > 0 {
		copies = 3
	}
	buf := make([]float64, copies*d)
	l := &logreg{meta: m, eta: p.Eta, l2: p.L2, decay: p.Decay, w: buf[:d:d], g2: buf[d : 2*d : 2*d], version: 1, prior: p.Prior}
	if p.Slow > 0 {
		l.ws, l.slowEta, l.selDecay, l.fastW = buf[2*d:], p.Slow*p.Eta, p.Select, 0.5
		l.byErrors = p.Weigh == weighErrors
	}
	return l, nil
}

// mixed is the learner's margin from its copies' margins mw and ms.
func (l *logreg) mixed(mw, ms float64) float64 { return l.fastW*mw + (1-l.fastW)*ms }

// margin is the learner's margin on x.
func (l *logreg) margin(x Vector) float64 {
	if l.ws == nil {
		return dot(l.w, x)
	}
	return l.mixed(dot(l.w, x), dot(l.ws, x))
}

// lossSlope is the log loss log(1 + e^(−y·m)) and its slope in m,
// −y·σ(−y·m), from one exponential and without overflow.
func lossSlope(y int, m float64) (loss, slope float64) {
	z := float64(y) * m
	e := math.Exp(-math.Abs(z))
	if z >= 0 {
		return math.Log1p(e), -float64(y) * e / (1 + e)
	}
	return -z + math.Log1p(e), -float64(y) / (1 + e)
}

// slope is the log loss's slope in the margin m, −y·σ(−y·m).
func slope(y int, m float64) float64 { return -float64(y) * Sigmoid(-float64(y)*m) }

// zeroOne is the zero-one loss at margin m: 1 for a wrong sign, 1/2 at 0.
func zeroOne(y int, m float64) float64 {
	switch z := float64(y) * m; {
	case z > 0:
		return 0
	case z < 0:
		return 1
	}
	return 0.5
}

// Sigmoid is 1/(1+e^(−z)), computed without overflow for any finite z: a
// logistic model's probability of +1 at margin z.
func Sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}

func (l *logreg) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	m := l.margin(x)
	if err := checkMargin(m); err != nil {
		return Prediction{}, err
	}
	p := labelPrediction(m, l.version)
	p.HasPosterior = true
	return p, nil
}

func (l *logreg) Learn(x Vector, y int, p Prediction) error {
	m, err := linearMargin(x, y, p, l.dim, l.version, func() float64 { return l.margin(x) })
	if err != nil {
		return err
	}
	l.step(x, y, m)
	return nil
}

// LearnSum takes one AdaGrad step on the log loss of the sum's margin.
func (l *logreg) LearnSum(x Vector, y int, sum float64) error {
	if err := checkSum(l, x, y, sum); err != nil {
		return err
	}
	l.step(x, y, sum)
	return nil
}

// QueryProbAt is 1: logistic regression learns every label.
func (*logreg) QueryProbAt(float64) float64 { return 1 }

// step is the adaptive step on the log loss at margin m, the margin of the
// model this learner is part of: a loop over a dense input's values, a
// callback per entry of a sparse one. With a slow copy, each copy steps at
// m with the learner's mixed margin replaced by the copy's own, and both
// are scored first; the fast copy's slope feeds the accumulators both
// divide by. The first label sets the accumulators' start (Prior).
func (l *logreg) step(x Vector, y int, m float64) {
	var g, gs float64
	if l.ws == nil {
		g = slope(y, m)
	} else {
		mw, ms := dot(l.w, x), dot(l.ws, x)
		rest := m - l.mixed(mw, ms) // the other parts' margin: 0 alone
		var lw, ls float64
		if l.byErrors {
			lw, ls = zeroOne(y, rest+mw), zeroOne(y, rest+ms)
			g, gs = slope(y, rest+mw), slope(y, rest+ms)
		} else {
			lw, g = lossSlope(y, rest+mw)
			ls, gs = lossSlope(y, rest+ms)
		}
		l.lossDiff = l.selDecay*l.lossDiff + lw - ls
		l.fastW = Sigmoid(-l.lossDiff)
	}
	if l.version == 1 && l.prior > 0 {
		l.start(x, g)
	}
	if vals, ok := x.DenseValues(); ok {
		w, ws, g2 := l.w[:len(vals)], l.ws, l.g2[:len(vals)]
		if ws != nil {
			ws = ws[:len(vals)]
		}
		for i, v := range vals {
			l.coordinate(w, ws, g2, i, g*v, gs*v)
		}
	} else {
		x.Entries(func(i int, v float64) { l.coordinate(l.w, l.ws, l.g2, i, g*v, gs*v) })
	}
	l.version++
}

// start sets every accumulator to Prior times the mean squared slope g·xᵢ
// over x's entries: the first label's scale, one for all coordinates.
func (l *logreg) start(x Vector, g float64) {
	sum, n := 0.0, 0
	x.Entries(func(_ int, v float64) { sum += g * v * g * v; n++ })
	if n == 0 {
		return
	}
	g0 := l.prior * sum / float64(n)
	for i := range l.g2 {
		l.g2[i] = g0
	}
}

// coordinate moves w[i] by its share gx = g·xᵢ of the fast copy's slope
// and, with a slow copy, ws[i] by its share gsx of the slow copy's, both
// over the fast copy's √Gᵢ.
func (l *logreg) coordinate(w, ws, g2 []float64, i int, gx, gsx float64) {
	gi := gx + l.l2*w[i]
	if gi == 0 {
		return
	}
	g2[i] = l.decay*g2[i] + gi*gi
	r := math.Sqrt(g2[i])
	if r == 0 {
		// A slope below what a float64 can square (|gᵢ| under about
		// 1.6e-162, e^-372.6: a label the sum gets right by hundreds in
		// the margin) over an accumulator that holds nothing: no step,
		// rather than ±Inf.
		return
	}
	w[i] -= l.eta * gi / r
	if ws != nil {
		// The slow copy's slope over the fast copy's √Gᵢ, which holds the
		// fast copy's slopes, not the slow one's: where the fast copy is
		// surely right and the slow one wrong, the slope can exceed √Gᵢ.
		// Over the larger of the two no step exceeds slow·η, as no fast
		// step exceeds η.
		gs := gsx + l.l2*ws[i]
		ws[i] -= l.slowEta * gs / max(r, math.Abs(gs))
	}
}

// MarshalBinary lays out, after the header: the version (u64), w and G
// (f64 × d each), then with a slow copy its weights (f64 × d) and the loss
// difference (f64).
func (l *logreg) MarshalBinary() ([]byte, error) {
	return l.AppendBinary(make([]byte, 0, 80+len(l.params)+8*(2+3*len(l.w))))
}

// AppendBinary appends MarshalBinary's bytes to b.
func (l *logreg) AppendBinary(b []byte) ([]byte, error) {
	e := l.headerOnto(b, baseVersion)
	e.u64(l.version)
	e.f64s(l.w)
	e.f64s(l.g2)
	if l.ws != nil {
		e.f64s(l.ws)
		e.f64(l.lossDiff)
	}
	return e.b, nil
}

func (l *logreg) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version := d.u64()
	w, g2 := d.f64s(l.dim), d.f64s(l.dim)
	var ws []float64
	var diff float64
	if l.ws != nil {
		if ws, diff = d.f64s(l.dim), d.f64(); d.err() == nil && (math.IsNaN(diff) || math.IsInf(diff, 0)) {
			d.fail(fmt.Sprintf("loss difference %g", diff))
		}
	}
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.w, l.g2, l.ws, l.lossDiff, l.fastW = version, w, g2, ws, diff, Sigmoid(-diff)
	return nil
}

func (p LogRegParams) maxWords(d int) (int64, error) {
	if p.Slow > 0 {
		return 3*int64(d) + 1, nil
	}
	return 2 * int64(d), nil
}
