package keyed

import (
	"fmt"
	"math"

	"github.com/driftstream/driftstream/learners"
)

// The additive population model (PopulationAdditive, issue 45): a key's
// prediction is the sign of m = m_shared(x) + m_key(x), the margins of the
// partition's shared part (held as PopulationKey, as the mixture's
// population learner is) and of the key's own learner. A label y teaches
// both parts at m (learners.Summand.LearnSum): the shared part from every
// label of the partition, the key's part from its own. It is feature
// augmentation (Daumé 2007) with both copies of x scaled by one: the
// shared weights carry what keys have in common, a key's weights its
// offset from them, which starts at zero and stays small while the key has
// few labels, because only its labels move it.

// summed is key ks's additive prediction of x, whose own part predicted p:
// the label and margin of the sum, and the shared part's prediction.
func (m *Model) summed(x learners.Vector, p learners.Prediction) (label int, sum float64, shared learners.Prediction, err error) {
	ps, err := m.shared.Population()
	if err != nil {
		return 0, 0, shared, err
	}
	if shared, err = ps.learner.Predict(x); err != nil {
		return 0, 0, shared, fmt.Errorf("shared part: %w", err)
	}
	sum = p.Score + shared.Score
	if math.IsNaN(sum) || math.IsInf(sum, 0) {
		return 0, 0, shared, fmt.Errorf("the sum of the shared and the key's margins is %g", sum)
	}
	label = 1
	if sum < 0 {
		label = -1
	}
	return label, sum, shared, nil
}

// sumNow is the additive margin of x by the parts' current states: a
// delayed label is learned at the margin the model has when it comes.
func (m *Model) sumNow(ks *State, x learners.Vector) (float64, error) {
	p, err := ks.learner.Predict(x)
	if err != nil {
		return 0, err
	}
	_, sum, _, err := m.summed(x, p)
	return sum, err
}

// learnSum teaches ks's learner, one part of an additive model, the label
// y of x at the model's margin sum, as learn guards a step.
func (m *Model) learnSum(ks *State, x learners.Vector, y int, sum float64) error {
	s := ks.learner.(learners.Summand) // Settings.Validate checked it
	return guarded(ks, x, func() error { return s.LearnSum(x, y, sum) })
}
