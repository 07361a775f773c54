package keyed

import (
	"fmt"

	"github.com/driftstream/driftstream/learners"
)

// The population model (issue 34): one learner per partition, of the keys'
// own learner and parameters, that is shown every label the partition sees
// (inline, delayed, early, whether or not the key asked for it) and learns
// it as its learner does: every label, or for a sampler the labels its own
// query rule draws when the label comes. A key seen for the first time — or reset, by the key API
// or a drift with OnDriftReset — starts as a copy of the population model
// at that moment rather than from zero, and learns on its own from there: a
// new key's first prediction is the population's, a key that departs from
// the population moves away from it at its own learner's pace.
//
// The model is held and checkpointed as a key of its own, PopulationKey:
// fenced, restored, kept, parked, evicted to the key store and caught up
// exactly as keys are, and it skips on replay the records it absorbed
// before its checkpoint, as keys do, so that its state and every copy made
// of it replay bit for bit.
//
// A copy carries the population's random streams: keys started from the
// same state draw the same randomness (randomized learners and the
// samplers' query draws) until their states part.

// PopulationKey is the key under which a partition's population model is
// held and checkpointed. An input record with this key is dead-lettered.
const PopulationKey = "\x00population"

// The population models (Settings.Population).
const (
	// PopulationOff keeps none: each key's learner alone.
	PopulationOff = "off"
	// PopulationAdditive keeps a shared part per partition, of the keys'
	// learner and parameters: a key predicts from the sum of the shared
	// part's margin and its own learner's, and a label teaches both parts
	// at that sum (learners.Summand). A key's own part starts at zero, so
	// a new key predicts as the shared part does and moves away from it
	// only as far as its own labels take it (additive.go).
	PopulationAdditive = "additive"
	// PopulationMixture keeps a population learner that seeds new keys,
	// and lets each key follow it or its own learner by a weighted
	// majority (below). The keys' learner's name means it too.
	PopulationMixture = "mixture"
)

// validatePopulation checks Settings.Population against l, a learner of the
// keys' configuration.
func (c *Settings) validatePopulation(l learners.Learner) error {
	switch c.Population {
	case PopulationOff, PopulationMixture, c.Learner:
		return nil
	case PopulationAdditive:
		if _, ok := l.(learners.Summand); !ok {
			return fmt.Errorf("population %s: learner %s cannot be one part of a sum (it is not a learners.Summand); use logreg, a perceptron, a second-order learner, or population %s", PopulationAdditive, c.Learner, PopulationMixture)
		}
		return nil
	}
	return fmt.Errorf("population %q: %s, %s, %s (or the keys' learner's name, %s)", c.Population, PopulationOff, PopulationAdditive, PopulationMixture, c.Learner)
}

// populated reports whether the model keeps a population model.
func (m *Model) populated() bool { return m.populate }

// mixing reports whether the worker's population model is the mixture:
// keys follow it or their own learner, which the key API, the snapshot's
// population share and weight, and the population predictions counter
// report (an additive model's keys follow neither: they add both).
func (m *Model) mixing() bool { return m.populate && !m.additive }

// Mixes reports whether c keeps the mixture population model (not off, not
// additive): the one whose per-key choice the metrics report.
func (c Settings) Mixes() bool {
	return c.Population != "" && c.Population != PopulationOff && c.Population != PopulationAdditive
}

// teachPopulation teaches the population model the label y of x, which
// record r brought (an event with its label, or the label of an earlier
// one); a record the model absorbed before its checkpoint is skipped. pred,
// when set, is the model's Predict of x in this state (the event's mix
// made it), not computed twice. An additive model's shared part learns at
// sum, the whole model's margin.
func (m *Model) teachPopulation(in Input, x learners.Vector, y int, pred *learners.Prediction, sum float64) error {
	ps, err := m.shared.Population()
	if err != nil {
		return err
	}
	if in.Offset <= ps.Applied[in.Topic] {
		return nil // replayed: learned before the checkpoint
	}
	var p learners.Prediction
	switch {
	case m.additive:
	case pred != nil:
		p = *pred
	default:
		p, err = ps.learner.Predict(x)
	}
	switch {
	case err != nil:
	case m.additive:
		err = m.learnSum(ps, x, y, sum)
	default:
		// A sampler's population asks as the sampler does, at the label:
		// it learns the labels its own rule draws (a tracking learner taught
		// every label of many keys follows whichever keys came last).
		if p = ps.learner.Decide(p); !m.sampling || p.Query {
			err = m.learn(ps, x, y, p)
		}
	}
	ps.Applied[in.Topic] = in.Offset
	m.shared.PopulationChanged(ps)
	if err != nil {
		return fmt.Errorf("population model: %w", err)
	}
	return nil
}

// seed makes l, a new learner of the keys' configuration, a copy of the
// population model when the worker keeps one (else l stays as built).
func (m *Model) seed(l learners.Learner) error {
	if !m.populated() || m.additive {
		return nil // an additive model's own parts start at zero
	}
	ps, err := m.shared.Population()
	if err != nil {
		return err
	}
	if !populationLeads(ps) {
		return nil // young keys' own learners beat it: start from scratch
	}
	snap, err := ps.learner.MarshalBinary()
	if err == nil {
		err = l.UnmarshalBinary(snap)
	}
	if err != nil {
		return fmt.Errorf("a copy of the population model: %w", err)
	}
	return nil
}

// MixtureStart is the population model's weight in a new key's mixture
// when the population leads (the key's own learner gets the rest); when it
// does not, the key starts at 1 − MixtureStart (populationLeads).
const MixtureStart = 2.0 / 3

// The mixture of a key's learner and the population model: a per-key
// weighted majority of the two experts (Littlestone & Warmuth), with
// Herbster & Warmuth's fixed share so that the lighter expert can win back
// the key after a drift. The key makes
// the prediction of the heavier expert, the population on a tie; every
// scored label multiplies a wrong expert's weight by mixBeta, then each
// weight gives mixShare of itself to the pool shared equally. A new key
// starts at MixtureStart for the population: it follows the population until
// its own learner has made fewer mistakes. The constants were chosen on
// draws apart from those the figures report (docs/POPULATION.md).
const (
	mixBeta  = 0.8
	mixShare = 0.01
	// youngEvents is the age, in events, up to which a key's labels score
	// the partition's prior; priorRate is the prior's weight per label, and
	// leadAccuracy the prior at which new keys start from the population.
	youngEvents  = 20
	priorRate    = 0.01
	leadAccuracy = 0.6
)

// mixture is a key's two experts' weights, summing to 1.
type mixture struct {
	population, own float64
}

// followsPopulation reports whether the key makes the population's
// prediction.
func (m *mixture) followsPopulation() bool { return m.population >= m.own }

// update scores the two experts on a label.
func (m *mixture) update(populationWrong, ownWrong bool) {
	if populationWrong {
		m.population *= mixBeta
	}
	if ownWrong {
		m.own *= mixBeta
	}
	sum := m.population + m.own
	m.population, m.own = m.population/sum, m.own/sum
	m.population = (1-mixShare)*m.population + mixShare/2
	m.own = (1-mixShare)*m.own + mixShare/2
}

// prior is the population model's recent accuracy on young keys — those
// with at most youngEvents events, whose start it decides — as an
// exponentially weighted mean (weight priorRate per label), kept in the
// population model's own mixture (population: the accuracy, own: the rest)
// so that it is checkpointed, restored and replayed with the model. It
// starts at MixtureStart (no mixture yet). Reading it changes nothing: only
// scoreMixture writes it, and marks the model dirty when it does.
func prior(ps *State) float64 {
	if ps.mix == nil {
		return MixtureStart
	}
	return ps.mix.population
}

// populationLeads reports whether the population model predicts young keys
// well (prior at least leadAccuracy): then a new key's learner starts as a
// copy of it and its mixture at MixtureStart, following it. Otherwise — keys
// with concepts of their own, where the population predicts young keys
// little better than a coin — a new key is a per-key learner: its learner
// starts from scratch and its mixture at 1−MixtureStart, following its own
// learner until the population proves better on it.
func populationLeads(ps *State) bool { return prior(ps) >= leadAccuracy }

// scoreMixture scores key ks's mixture, and the partition's prior, on a
// label of record r: populationWrong and ownWrong say which expert's
// prediction for the event was wrong. The prior counts a record once, as
// the population model learns it (teachPopulation's rule).
func (m *Model) scoreMixture(in Input, ks *State, populationWrong, ownWrong bool) error {
	ks.mix.update(populationWrong, ownWrong)
	return m.scorePrior(in, ks, populationWrong)
}

// scorePrior scores the partition's prior on a label of key ks, which the
// population model's prediction got wrong or not, when the key is young.
func (m *Model) scorePrior(in Input, ks *State, populationWrong bool) error {
	if ks.stats.events > youngEvents {
		return nil // only young keys score the prior
	}
	ps, err := m.shared.Population()
	if err != nil {
		return err
	}
	if in.Offset > ps.Applied[in.Topic] {
		right := 0.0
		if !populationWrong {
			right = 1
		}
		acc := (1-priorRate)*prior(ps) + priorRate*right
		ps.setMix(mixture{population: acc, own: 1 - acc})
		m.shared.PopulationChanged(ps)
	}
	return nil
}

// mixed is the prediction key ks makes of x with a population model: its
// learner's decided prediction own, or the population's, by the key's
// mixture (made on first use). It returns the label and score made and the
// population's prediction.
func (m *Model) mixed(ks *State, x learners.Vector, own learners.Prediction) (label int, score float64, population learners.Prediction, err error) {
	ps, err := m.shared.Population()
	if err != nil {
		return 0, 0, population, err
	}
	pp, err := ps.learner.Predict(x)
	if err != nil {
		return 0, 0, pp, fmt.Errorf("population model: %w", err)
	}
	if ks.mix == nil {
		start := 1 - MixtureStart // the key's own learner, unless the population proves better on the key
		if populationLeads(ps) {
			start = MixtureStart
		}
		ks.setMix(mixture{population: start, own: 1 - start})
	}
	if ks.mix.followsPopulation() {
		return pp.Label, pp.Score, pp, nil
	}
	return own.Label, own.Score, pp, nil
}

// PopulationWeight is the population model's weight in the key's mixture,
// false before the key's first event under the mixture. On the population
// model's own State it is the prior: its recent accuracy on young keys.
func (ks *State) PopulationWeight() (float64, bool) {
	if ks.mix == nil {
		return 0, false
	}
	return ks.mix.population, true
}
