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
//
// Keys that share nothing: a shared part taught every key's unrelated
// labels adds noise that each key's own part must cancel. So a key takes
// the shared part, or not, while it is young, by the partition's prior
// (the shared part's recent accuracy on young keys, the mixture's prior):
// while the shared part predicts young keys well (populationLeads) the key
// predicts from the sum; while it does not, the key is a per-key learner
// (its own part alone, m = m_key). The key chooses again at each of its
// first youngEvents events (and at a delayed label meanwhile), so that a
// key born before the prior knew the keys share nothing still turns to
// its own part; from then on its choice is fixed. The choice is the key's
// share (1 or 0), kept in its mixture's population weight so that it is
// checkpointed with the key; a reset starts it again. Young keys' labels
// keep scoring the prior by the shared part's own prediction, whichever
// way their key chose, so the partition turns back when the keys come to
// share more.

// share is key ks's weight on the shared part ps, chosen again while the
// key is young (fewer than youngEvents events), then kept.
func share(ks, ps *State) float64 {
	if ks.mix == nil || ks.stats.events < youngEvents {
		a := 0.0
		if populationLeads(ps) {
			a = 1
		}
		ks.setMix(mixture{population: a, own: 1 - a})
	}
	return ks.mix.population
}

// summed is key ks's additive prediction of x, whose own part predicted p:
// the label and margin of the sum, and the shared part's prediction.
func (m *Model) summed(ks *State, x learners.Vector, p learners.Prediction) (label int, sum float64, shared learners.Prediction, err error) {
	ps, err := m.shared.Population()
	if err != nil {
		return 0, 0, shared, err
	}
	if shared, err = ps.learner.Predict(x); err != nil {
		return 0, 0, shared, fmt.Errorf("shared part: %w", err)
	}
	sum = p.Score + share(ks, ps)*shared.Score
	if math.IsNaN(sum) || math.IsInf(sum, 0) {
		return 0, 0, shared, fmt.Errorf("the sum of the shared and the key's margins is %g", sum)
	}
	return learners.LabelOf(sum), sum, shared, nil
}

// sumNow is the additive margin of x by the parts' current states: a
// delayed label is learned at the margin the model has when it comes.
func (m *Model) sumNow(ks *State, x learners.Vector) (sum, shared float64, err error) {
	p, err := ks.learner.Predict(x)
	if err != nil {
		return 0, 0, err
	}
	_, sum, sp, err := m.summed(ks, x, p)
	return sum, sp.Score, err
}

// sharedMargin is the margin at which the shared part learns a label of
// key ks whose model's margin is sum and shared part's shared: the sum's
// when the key takes the shared part, else the shared part's own (it is
// then a model of all keys, which the prior keeps scoring).
func sharedMargin(ks *State, sum, shared float64) float64 {
	if ks.mix != nil && ks.mix.population == 0 {
		return shared
	}
	return sum
}

// learnSum teaches ks's learner, one part of an additive model, the label
// y of x at the model's margin sum, as learn guards a step.
func (m *Model) learnSum(ks *State, x learners.Vector, y int, sum float64) error {
	s := ks.learner.(learners.Summand) // Settings.Validate checked it
	return guarded(ks, x, func() error { return s.LearnSum(x, y, sum) })
}
