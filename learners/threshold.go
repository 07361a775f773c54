package learners

import (
	"errors"
	"fmt"
	"math"
)

// ErrDomain reports an input value outside the domain a learner is defined on
// (for example a negative attribute for Winnow).
var ErrDomain = errors.New("input outside the learner's domain")

// ThresholdTrackerParams configures `threshold-tracker` (docs/spec/ALGORITHMS.md §3).
type ThresholdTrackerParams struct {
	Gamma float64 `json:"gamma" doc:"γ > 0: the largest per-round threshold move considered near; the interval widens by γ each round"`
}

// thresholdTracker learns a drifting 1-D threshold concept f_τ(x) = 1 iff x ≥ τ
// on x ∈ [0,1] (seed 000 §5.1). It keeps the interval I = [a, b] of thresholds
// consistent with recent labels, predicts by majority of I, and widens I by γ
// every round so that a moving τ stays inside; a label inconsistent with all
// of I means a shift and resets I to [0,1].
type thresholdTracker struct {
	meta
	alwaysDecide
	gamma   float64
	a, b    float64
	resets  int
	version uint64
}

func newThresholdTracker(p *ThresholdTrackerParams, cfg Config) (Learner, error) {
	m, err := newMeta("threshold-tracker", cfg, p)
	if err != nil {
		return nil, err
	}
	if cfg.Dim != 1 {
		return nil, fmt.Errorf("learner threshold-tracker: dimension %d: it is a 1-D learner, set dimension 1: %w", cfg.Dim, ErrParam)
	}
	if !(p.Gamma > 0) || p.Gamma > 1 {
		return nil, paramError(m.name, "gamma", p.Gamma, "must be in (0, 1]")
	}
	return &thresholdTracker{meta: m, gamma: p.Gamma, a: 0, b: 1, version: 1}, nil
}

func (l *thresholdTracker) input(x Vector) (float64, error) {
	if err := checkDim(x, 1); err != nil {
		return 0, err
	}
	v := x.At(0)
	if !(v >= 0 && v <= 1) {
		return 0, fmt.Errorf("threshold-tracker input %v not in [0,1]: %w", v, ErrDomain)
	}
	return v, nil
}

// label is the majority vote of the thresholds in I: x ≥ b → 1, x ≤ a → 0,
// inside → 1 iff x is at least as close to b as to a.
func (l *thresholdTracker) label(x float64) int {
	switch {
	case x >= l.b:
		return 1
	case x <= l.a:
		return -1
	case x-l.a >= l.b-x:
		return 1
	}
	return -1
}

func (l *thresholdTracker) Predict(x Vector) (Prediction, error) {
	v, err := l.input(x)
	if err != nil {
		return Prediction{}, err
	}
	y := l.label(v)
	return Prediction{Label: y, Score: v - (l.a+l.b)/2, Prob: float64(y+1) / 2, QueryProb: 1, stamp: l.version}, nil
}

func (l *thresholdTracker) Learn(x Vector, y int, _ Prediction) error {
	v, err := l.input(x)
	if err != nil {
		return err
	}
	if err := checkLabel(y); err != nil {
		return err
	}
	g := l.gamma
	switch {
	case v <= l.a || v >= l.b: // the whole interval agreed
		if l.label(v) == y {
			l.a, l.b = math.Max(0, l.a-g), math.Min(1, l.b+g)
		} else {
			l.a, l.b = 0, 1 // inconsistent with every τ in I: a shift happened
			l.resets++
		}
	case y == 1: // τ ≤ x
		l.a, l.b = math.Max(0, l.a-g), math.Min(1, v+g)
	default: // τ > x
		l.a, l.b = math.Max(0, v-g), math.Min(1, l.b+g)
	}
	l.version++
	return nil
}

// interval returns I = [a, b] and the number of resets, for tests and tools.
func (l *thresholdTracker) interval() (a, b float64, resets int) { return l.a, l.b, l.resets }

func (l *thresholdTracker) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.f64(l.a)
	e.f64(l.b)
	e.int(l.resets)
	return e.b, nil
}

func (l *thresholdTracker) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version, a, b, resets := d.u64(), d.f64(), d.f64(), d.int()
	if err := d.end(); err != nil {
		return err
	}
	if !(0 <= a && a <= b && b <= 1) {
		return fmt.Errorf("threshold interval [%v, %v]: %w", a, b, ErrSnapshot)
	}
	l.version, l.a, l.b, l.resets = version, a, b, resets
	return nil
}
