package learners

import (
	"encoding"
	"errors"
	"fmt"
	"math/rand/v2"
)

// Learner is an online binary classifier over labels −1/+1 that tracks a
// drifting concept. Implementations are not safe for concurrent use.
type Learner interface {
	// Name is the catalog name the learner was built under.
	Name() string
	// Dim is the input dimension the learner accepts.
	Dim() int
	// Predict scores x without changing any state, so it can be called any
	// number of times. It fails on a wrong dimension or a non-finite margin.
	Predict(x Vector) (Prediction, error)
	// Decide completes a round: it consumes the round's randomness (randomized
	// predictions, query draws) and round counters, and returns the final
	// prediction with Label and Query set. Call it exactly once per round, on
	// the result of Predict, before Learn.
	Decide(p Prediction) Prediction
	// Learn absorbs the label y (−1 or +1) of x, whose decided prediction is p.
	// Samplers must only be taught rounds they queried. If the state changed
	// since p was made (a delayed label), pass a fresh Predict result. On error
	// the state is untouched.
	Learn(x Vector, y int, p Prediction) error

	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// Prediction is a learner's output for one input.
type Prediction struct {
	// Label is the predicted class, −1 or +1.
	Label int
	// Score is the algorithm's margin; positive means +1 (docs/spec/ALGORITHMS.md §1.1).
	Score float64
	// Prob is the probability that the prediction is +1: 0 or 1 for
	// deterministic learners, p(r) for randomized Shifting Winnow. Expected
	// mistakes are Prob when y = −1 and 1 − Prob when y = +1.
	Prob float64
	// QueryProb is the probability that a sampler asks for this label; 1 for
	// learners that learn from every label.
	QueryProb float64
	// Query is set by Decide: whether the learner wants this round's label.
	Query bool
	// HasPosterior is set when Score is a log-odds (a logistic model's
	// margin), so that Posterior is the probability that the label is +1;
	// margin learners have none.
	HasPosterior bool

	stamp   uint64       // learner version when predicted: lets Learn reuse Score
	members []Prediction // weighted-majority: the members' predictions
	rng0    rand.PCG     // tracking-winnow transformation 2: RNG before the round
	draws   int          // tracking-winnow transformation 2: uniforms used
}

// Posterior is the learner's estimate of the probability that the label
// is +1, σ(Score), when HasPosterior is set (else meaningless). Unlike
// Prob it says nothing of the prediction made, which is Label whatever
// Posterior is. It is derived when asked: a prediction nobody reads the
// probability of costs no exponential.
func (p Prediction) Posterior() float64 { return Sigmoid(p.Score) }

// Mistake reports whether the decided label differs from y.
func (p Prediction) Mistake(y int) bool { return p.Label != y }

// ExpectedMistake is the probability of a mistake on label y: 0 or 1 for
// deterministic predictions.
func (p Prediction) ExpectedMistake(y int) float64 {
	if y > 0 {
		return 1 - p.Prob
	}
	return p.Prob
}

// sign maps a margin to a label; a zero margin predicts +1 (docs/spec/ALGORITHMS.md §1.2).
// LabelOf is the label a margin m predicts: +1 when m ≥ 0, else −1.
func LabelOf(m float64) int { return sign(m) }

func sign(m float64) int {
	if m >= 0 {
		return 1
	}
	return -1
}

// labelPrediction builds the prediction of a deterministic margin learner that
// learns from every label.
func labelPrediction(m float64, stamp uint64) Prediction {
	l := sign(m)
	return Prediction{Label: l, Score: m, Prob: float64(l+1) / 2, QueryProb: 1, stamp: stamp}
}

// ErrLabel reports a label other than −1 or +1.
var ErrLabel = errors.New("label must be -1 or +1")

// checkLabel validates a ±1 label.
func checkLabel(y int) error {
	if y != 1 && y != -1 {
		return fmt.Errorf("label %d: %w", y, ErrLabel)
	}
	return nil
}

// current validates x and y for Learn and returns p if it was predicted
// against the learner's current state (version), else a fresh prediction: a
// delayed label must be judged by the state that learns from it.
func current(l Learner, version uint64, x Vector, y int, p Prediction) (Prediction, error) {
	if err := checkLabel(y); err != nil {
		return p, err
	}
	if p.stamp == version && version != 0 {
		return p, checkDim(x, l.Dim())
	}
	return l.Predict(x)
}

// alwaysDecide is embedded by deterministic learners that learn from every
// label: Decide only marks the round as wanting its label.
type alwaysDecide struct{}

// Decide marks p as wanting its label; deterministic learners draw nothing.
func (alwaysDecide) Decide(p Prediction) Prediction {
	p.Query = true
	return p
}
