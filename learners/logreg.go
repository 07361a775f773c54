package learners

import (
	"math"
)

// LogRegParams configures `logreg`.
type LogRegParams struct {
	Eta float64 `json:"eta" doc:"base step η > 0: coordinate i moves by η·gᵢ/√Gᵢ, Gᵢ its decayed sum of squared slopes"`
	L2  float64 `json:"l2" doc:"L2 penalty ≥ 0 on the weights of the coordinates an input touches (0: none)"`
	// Decay below 1 forgets old gradients, so that steps stay large enough
	// to follow a drifting concept (AdaGrad's shrink as 1/√t).
	Decay float64 `json:"decay" doc:"in (0, 1]: each touch multiplies a coordinate's accumulator Gᵢ by it before adding gᵢ² (1: AdaGrad, whose steps shrink as 1/√t; below 1, RMSProp-like steps that keep tracking a drift)"`
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
// It is beyond the five papers: the baseline a user would otherwise pick
// (River's LogisticRegression), in the catalog so that the service's keys
// can be it.
type logreg struct {
	meta
	alwaysDecide
	eta, l2, decay float64
	w, g2          []float64
	version        uint64
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
	m, err := newMeta("logreg", cfg, p)
	if err != nil {
		return nil, err
	}
	return &logreg{meta: m, eta: p.Eta, l2: p.L2, decay: p.Decay, w: make([]float64, cfg.Dim), g2: make([]float64, cfg.Dim), version: 1}, nil
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
	m := dot(l.w, x)
	if err := checkMargin(m); err != nil {
		return Prediction{}, err
	}
	p := labelPrediction(m, l.version)
	p.HasPosterior = true
	return p, nil
}

func (l *logreg) Learn(x Vector, y int, p Prediction) error {
	m, err := linearMargin(x, y, p, l.dim, l.version, func() float64 { return dot(l.w, x) })
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

// step is the adaptive step on the log loss at margin m: a loop over a
// dense input's values, a callback per entry of a sparse one.
func (l *logreg) step(x Vector, y int, m float64) {
	g := -float64(y) * Sigmoid(-float64(y)*m)
	if vals, ok := x.DenseValues(); ok {
		w, g2 := l.w[:len(vals)], l.g2[:len(vals)]
		for i, v := range vals {
			l.coordinate(w, g2, i, g*v)
		}
	} else {
		x.Entries(func(i int, v float64) { l.coordinate(l.w, l.g2, i, g*v) })
	}
	l.version++
}

// coordinate moves w[i] by its share gx = g·xᵢ of the loss's slope.
func (l *logreg) coordinate(w, g2 []float64, i int, gx float64) {
	gi := gx + l.l2*w[i]
	if gi == 0 {
		return
	}
	g2[i] = l.decay*g2[i] + gi*gi
	w[i] -= l.eta * gi / math.Sqrt(g2[i])
}

func (l *logreg) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.f64s(l.w)
	e.f64s(l.g2)
	return e.b, nil
}

func (l *logreg) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version := d.u64()
	w, g2 := d.f64s(l.dim), d.f64s(l.dim)
	if err := d.end(); err != nil {
		return err
	}
	l.version, l.w, l.g2 = version, w, g2
	return nil
}

func (LogRegParams) maxWords(d int) (int64, error) { return 2 * int64(d), nil }
