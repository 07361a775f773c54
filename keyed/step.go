package keyed

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

// Input is one decoded record of a key: where it came from and its event
// (an input, with its label or not, or a label record).
type Input struct {
	Key       string
	Topic     int // EventsTopic or LabelsTopic
	Partition int
	Offset    int64
	Event     *topics.Event
}

// Outcome is a scored prediction: when its event happened and whether it
// was wrong.
type Outcome struct {
	// Time is the event's "ts", zero when it had none.
	Time  time.Time
	Wrong bool
	// Expected is the probability that the prediction made was wrong: the
	// learner's own for its prediction scored as the event came (a
	// randomized learner's draw), else 0 or 1 as Wrong — a prediction the
	// population model took part in, or a label joined to an awaited event
	// (the wait keeps the label predicted, not its probability).
	Expected float64
}

// Step is what one record did to its key: the outputs it makes, in the
// order they are written (its prediction, its label request, its drift
// alerts), the prediction it scored, and whether the key refused or failed
// it. The Model reuses one Step: it is valid until the Model's next call.
type Step struct {
	// Prediction is the event's prediction, when Predicted.
	Prediction topics.Prediction
	Predicted  bool
	// Query is the label request for the event, when Queried.
	Query   topics.LabelQuery
	Queried bool
	// Alerts are the drift alerts the record raised, in order.
	Alerts []topics.DriftAlert
	// Scored is set when the record scored a prediction against its label:
	// an event with its label, or a label joined to its awaited event.
	// Outcome is that score.
	Scored  bool
	Outcome Outcome
	// PopulationWeight is the population model's weight in the key's
	// mixture when it predicted (the mixture only).
	PopulationWeight float64
	// Refused is set when the key refused the record before it touched the
	// key's state (a duplicate id, a record on the labels topic that is not
	// a label): the record is invalid, the key unchanged, and a replay
	// refuses it again. Nothing else in the Step is set.
	Refused error
	// Failed is set when the key absorbed the record but learning from it
	// failed (a step that would make the state non-finite, the population
	// model's holder failing): the outputs made before stand.
	Failed error
	// The values the prediction's pointers point to: fields, not an
	// allocation per event.
	qprob, post float64
}

// Step applies in, a record of key state ks (made by NewState for a key
// seen for the first time), and returns what it did. The holder writes the
// Step's outputs, sets ks.Applied, and keeps ks for the next checkpoint —
// also when Failed is set; when Refused is set, the record leaves ks as it
// was.
func (m *Model) Step(in Input, ks *State) *Step {
	st := &m.step
	alerts := st.Alerts[:0]
	*st = Step{Alerts: alerts}
	ev := in.Event
	if in.Topic == LabelsTopic && ev.Kind != topics.LabelRecord {
		st.Refused = errors.New("the labels topic carries label records only ({\"id\",\"label\"})")
		return st
	}
	if ev.Kind == topics.Input && ks.awaiting(ev.ID) {
		// Its label could not tell the two apart: refused before it touches
		// the key, so that a replay refuses it again.
		st.Refused = fmt.Errorf("duplicate id %q: an earlier event of key %q with this id still awaits its label; ids must be unique per key: %w",
			ev.ID, in.Key, topics.ErrInvalid)
		return st
	}
	if ev.Kind == topics.LabelRecord {
		st.Failed = m.label(in, ks)
		return st
	}
	label := ev.Label
	if label == 0 {
		if i := slices.IndexFunc(ks.early(), func(e early) bool { return e.id == ev.ID }); i >= 0 {
			lw := ks.wait
			label = lw.early[i].label // its label came first on the labels topic
			lw.held -= lw.early[i].size()
			lw.early = slices.Delete(lw.early, i, i+1)
			m.stats.LabelsJoined++
		}
	}
	st.Failed = m.event(in, ks, label)
	return st
}

// asks is the query rule, the one place the service reads it: whether the
// key asks for the label of an event predicted p with margin score, and
// the probability it did. The margin rule draws only when draw is set (an
// unlabeled event); a sampler's own draw was made in Decide. A sampler
// decides by its own rule (p.Query, p.QueryProb, drawn in Decide); any
// other learner by the margin rule b/(b+|score|) (Settings.QueryScale),
// drawn from the key's query stream.
func (m *Model) asks(ks *State, p learners.Prediction, score float64, draw bool) (bool, float64) {
	if m.sampling {
		return p.Query, p.QueryProb
	}
	b := m.s.QueryScale
	if b <= 0 {
		return false, 0
	}
	prob := b / (b + math.Abs(score))
	return draw && rand.New(&ks.query).Float64() < prob, prob
}

// learns reports whether a key learns a label it asked for (asked) or
// not: every label with LearnAll, and every one a learner that is not a
// sampler gets.
func (m *Model) learns(asked bool) bool { return m.learnAll || !m.sampling || asked }

// round is an event's prediction as the key makes it.
type round struct {
	x learners.Vector
	// p is the key's learner's prediction, decided (a randomized
	// learner's draw), pop the population model's (with one).
	p, pop learners.Prediction
	// made and score are the prediction made: the learner's, the sum's
	// (additive) or the expert's the key follows (mixture).
	made  int
	score float64
	// query is whether the key asks for the label, with probability qprob.
	query bool
	qprob float64
}

// event predicts an event whose label is label (0: none yet), then scores
// and learns it, or asks for and awaits its label.
func (m *Model) event(in Input, ks *State, label int) error {
	rd := &m.round // reused: a round of its own per event escapes to the heap
	var err error
	if *rd, err = m.predict(in, ks); err != nil {
		return err
	}
	rd.query, rd.qprob = m.asks(ks, rd.p, rd.score, label == 0)
	m.predicted(in, ks, rd)
	// The label-free signals, once the event is handled: a sampler's own
	// query decision, or the margin rule's probability for the others.
	if len(m.s.Detectors) > 0 {
		ks.tick()
		signal := rd.qprob
		if m.sampling {
			signal = boolValue(rd.query)
		}
		defer m.eventSignals(in, ks, signal, rd.score, in.Event.TS)
	}
	if label != 0 {
		return m.inline(in, ks, rd, label)
	}
	m.await(in, ks, rd)
	return nil
}

// predict is the key's prediction of the event: its learner's, decided,
// and with a population model the sum's or the followed expert's. It
// expires the key's awaited events past the TTL first.
func (m *Model) predict(in Input, ks *State) (round, error) {
	var rd round
	x, err := m.s.Vector.Vector(*in.Event)
	if err != nil {
		return rd, err
	}
	if ks.std != nil { // scaled by the key's earlier inputs, then counted
		if x, err = ks.std.Next(x); err != nil {
			return rd, err
		}
	}
	rd.x = x
	p, err := ks.learner.Predict(x)
	if err != nil {
		return rd, err
	}
	m.expire(in, ks)
	var sumLabel int
	var sum float64
	if m.additive {
		// The prediction is the sum's: a sampler asks by the whole model's
		// margin, as the margin rule reads it; the draw is the same one.
		if sumLabel, sum, rd.pop, err = m.summed(ks, x, p); err != nil {
			return rd, err
		}
		p.QueryProb = ks.learner.(learners.Summand).QueryProbAt(sum)
	}
	// Decide the round before emitting, so the prediction message is final.
	rd.p = ks.learner.Decide(p)
	rd.made, rd.score = rd.p.Label, rd.p.Score // decided: a randomized learner's draw
	if m.additive {
		rd.made, rd.score = sumLabel, sum
	}
	// With the mixture the key picks whose prediction it makes (the
	// learner's own, or the population's); a sampler's own rule still
	// decides its queries, the margin rule reads the prediction made.
	if m.mixing() {
		if rd.made, rd.score, rd.pop, err = m.mixed(ks, x, rd.p); err != nil {
			return rd, err
		}
		m.step.PopulationWeight = ks.mix.population
	}
	return rd, nil
}

// predicted puts the round's prediction in the Step and counts it.
func (m *Model) predicted(in Input, ks *State, rd *round) {
	st := &m.step
	st.Predicted = true
	st.Prediction = topics.Prediction{ID: in.Event.ID, Key: in.Key, KeyB64: topics.KeyB64(in.Key), Label: rd.made, Score: rd.score,
		Learner: m.s.Learner, Partition: in.Partition, Offset: in.Offset}
	if m.sampling {
		st.qprob = rd.qprob
		st.Prediction.QueryProb = &st.qprob
	}
	if rd.p.HasPosterior { // a logistic key: the score made (its own, the sum, the population's) is a log-odds
		st.post = learners.Sigmoid(rd.score)
		st.Prediction.Posterior = &st.post
	}
	m.stats.Events++
	ks.stats.events++
	m.stats.Predictions++
	if m.mixing() && ks.mix.followsPopulation() { // as mixed decided
		m.stats.FollowedPopulation++
	}
	if !m.sampling || rd.query {
		m.stats.Asked++
	}
}

// labeled is an event met by its label: with no delay (the label came in
// the event) or later (a label record joined to the awaited event). Both
// take one path, resolve: score the prediction made at the event, update
// the key's mixture, learn, teach the population model, watch the outcome.
type labeled struct {
	// x is the event's input, zero when neither the key nor the population
	// model learns the label (LearnQueried: a sampler's unasked label).
	x     learners.Vector
	label int
	ts    time.Time // the event's time, zero when it had none
	// made is the label predicted at the event, 0 when unknown (a key state
	// written before predictions were kept): then nothing is scored.
	made int
	// own and population are the mixture's experts' labels at the event, 0
	// without the mixture.
	own, population int
	// keyLearns is set when the key's learner learns the label.
	keyLearns bool
	// now is the event's round when the key's state has not moved since
	// (a label with no delay): its prediction, decided, is the one learned
	// from, and its probability of a mistake refines the outcome. Nil for
	// a delayed label: the key predicts x again by its current state.
	now *round
}

// resolve scores and learns an event met by its label (see labeled).
func (m *Model) resolve(in Input, ks *State, l *labeled) error {
	if l.made != 0 {
		m.score(ks, l.made != l.label, l.ts)
		if l.now == nil {
			m.stats.DelayedLabeled++
		} else if !m.populated() {
			m.step.Outcome.Expected = l.now.p.ExpectedMistake(l.label)
		}
	}
	var err error
	if l.population != 0 && ks.mix != nil {
		err = m.scoreMixture(in, ks, l.population != l.label, l.own != l.label)
	}
	var sum, shared float64 // an additive model's margin by its parts' current states, and its shared part's
	if m.additive && l.x.Dim() > 0 && err == nil {
		if l.now != nil {
			sum, shared = l.now.score, l.now.pop.Score
		} else {
			sum, shared, err = m.sumNow(ks, l.x)
		}
		if err == nil {
			err = m.scorePrior(in, ks, learners.LabelOf(shared) != l.label)
		}
	}
	switch {
	case err != nil || !l.keyLearns:
	case m.additive:
		err = m.learnSum(ks, l.x, l.label, sum)
	case l.now != nil:
		err = m.learn(ks, l.x, l.label, l.now.p)
	default:
		var p learners.Prediction
		if p, err = ks.learner.Predict(l.x); err == nil { // the state moved on since the event: learn from the current one
			err = m.learn(ks, l.x, l.label, p)
		}
	}
	if m.populated() && l.x.Dim() > 0 && err == nil {
		var pred *learners.Prediction // the population's prediction of x, when the round made it
		if l.now != nil {
			pred = &l.now.pop
		}
		err = m.teachPopulation(in, l.x, l.label, pred, sharedMargin(ks, sum, shared))
	}
	if l.made != 0 {
		m.outcome(in, ks, l.made != l.label, l.ts)
	}
	return err
}

// inline resolves an event that came with its label: a label with no
// delay, learned from the round's prediction (the key's state has not moved
// since it).
func (m *Model) inline(in Input, ks *State, rd *round, label int) error {
	l := labeled{x: rd.x, label: label, ts: in.Event.TS, made: rd.made, keyLearns: m.learns(rd.query), now: rd}
	if m.mixing() {
		l.own, l.population = rd.p.Label, rd.pop.Label
	}
	return m.resolve(in, ks, &l)
}

// await asks for the label of an unlabeled event when the key wants it,
// and keeps the event awaiting its label, asked for or not: the label,
// when it comes, scores this prediction, and is learned unless the learner
// is a sampler that did not ask and only asked labels teach (LearnQueried:
// then x need not be kept).
func (m *Model) await(in Input, ks *State, rd *round) {
	ev := in.Event
	if rd.query {
		m.stats.Queries++
		m.step.Queried = true
		m.step.Query = topics.LabelQuery{ID: ev.ID, Key: in.Key, KeyB64: topics.KeyB64(in.Key), Score: rd.score, QueryProb: rd.qprob, Partition: in.Partition, Offset: in.Offset}
	}
	q := pending{id: ev.ID, offset: in.Offset, decided: rd.made, queried: rd.query, ts: ev.TS, own: int8(rd.p.Label)}
	if m.mixing() { // the experts' labels, for the key's mixture when the label comes
		q.population = int8(rd.pop.Label)
	}
	switch {
	case m.learns(rd.query):
		q.keep(rd.x)
	case m.populated(): // the population learns every label; the key only those it asked for
		q.keep(rd.x)
		q.populationOnly = true
	}
	// The event's input as decoded: the events topic gives it back.
	q.sourced = q.hasX && ks.std == nil && m.s.AwaitedInputs == AwaitedFromEvents
	if q.sourced {
		m.track(q.offset)
	}
	lw := ks.waiting()
	m.stats.LabelsExpired += lw.await(q, m.s.MaxPending, &m.sourced)
	lw.bound(m.s.MaxPendingBytes, m.stats, &m.sourced)
}

// score counts a prediction of ks scored against its label, wrong or not,
// as the Step's outcome (its Expected as Wrong: the caller may refine it).
func (m *Model) score(ks *State, wrong bool, ts time.Time) {
	m.stats.Labeled++
	ks.stats.labeled++
	if wrong {
		m.stats.Mistakes++
		ks.stats.mistakes++
	}
	m.step.Scored = true
	m.step.Outcome = Outcome{Time: ts, Wrong: wrong, Expected: boolValue(wrong)}
}
