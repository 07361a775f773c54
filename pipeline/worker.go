package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

// Worker processes one partition. It is not safe for concurrent use: one
// goroutine owns it, which is what makes per-key state lock-free.
type Worker struct {
	cfg       Config
	maker     *learners.Maker // the keys' learners, parameters decoded once
	partition int
	epoch     checkpoint.Epoch // written into every checkpoint record
	sampling  bool
	populate  bool // a population model (Config.Population)
	additive  bool // the additive one (PopulationAdditive)
	learnAll  bool // every label teaches (Config.LearnFrom)
	keys      map[string]*keyState
	// cache, when set, holds the keys beyond those in memory (UseKeyStore).
	cache *keyCache
	// dirty lists the keys changed since the last checkpoint (each held
	// key once: keyState.dirty), in any order, and keys not held whose
	// records must be superseded.
	dirty    []string
	through  [2]int64 // last offset processed per topic
	suppress [2]int64 // outputs for offsets below these are not emitted (replay)
	out      []Output
	outBytes []byte  // the chunk outputs' values are appended to (emit)
	qprob    float64 // the query probability of the prediction being emitted
	post     float64 // the posterior of the prediction being emitted
	stats    Totals
	last     Outcome
	// lastWeight is the population model's weight in the mixture of the
	// key that made the last prediction (with a population model).
	lastWeight float64
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

// LastOutcome is the outcome that the last record to increase
// Totals().Labeled scored (a labeled event, or a label joined to its
// awaited event): with the counters, what a backtest plots over event time.
func (w *Worker) LastOutcome() Outcome { return w.last }

// NewWorker returns a worker for a partition with no state.
func NewWorker(cfg Config, partition int) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	info, _ := learners.Lookup(cfg.Learner)
	maker, err := learners.NewMaker(cfg.Learner, cfg.Params, cfg.Vector.Dim)
	if err != nil {
		return nil, err
	}
	return &Worker{cfg: cfg, maker: maker, partition: partition, sampling: info.Sampling, populate: cfg.Population != PopulationOff,
		additive: cfg.Population == PopulationAdditive, learnAll: cfg.LearnFrom == LearnAll, keys: map[string]*keyState{},
		through: [2]int64{-1, -1}}, nil
}

// Keys is the number of keys held, in memory or in the key store.
func (w *Worker) Keys() int {
	if w.cache != nil {
		return w.cache.count
	}
	return len(w.keys)
}

// TakeOutputs returns the outputs produced since the last call. They are the
// caller's: the worker never writes to them again.
func (w *Worker) TakeOutputs() []Output {
	out := w.out
	// The chunk stays: later outputs are appended past the values taken,
	// which are never written again. A fresh chunk per call would cost 32 KiB
	// per flush however few outputs it held.
	w.out = make([]Output, 0, len(out)) // about as many by the next call
	return out
}

// deadLetter emits the original record with the reason, cut to fit the
// dead-letter topic (DeadLetter.Output).
func (w *Worker) deadLetter(r Record, class string, err error) {
	w.stats.DeadLetters++
	switch class {
	case ReasonMissingKey:
		w.stats.MissingKey++
	case ReasonKeyTooLong:
		w.stats.KeyTooLong++
	case ReasonInvalidEvent:
		w.stats.InvalidEvent++
	default:
		w.stats.Rejected++
	}
	if r.Offset < w.suppress[r.Topic] {
		return
	}
	d := DeadLetter{Reason: class, Err: err, SourceTopic: w.cfg.TopicNames[r.Topic], Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value,
		Extra: r.Trace.set(nil)} // sized with the rest
	o := d.Output(w.cfg.Outputs.Of(OutDeadLetter), w.cfg.MaxKeyLength)
	o.Source = Position{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	w.out = append(w.out, o)
}

// outputChunk is the size of the chunks output values are encoded into: one
// allocation per few hundred outputs instead of one each.
const outputChunk = 32 << 10

// emit encodes v as the next output of kind, keyed by the record's key, unless
// the record's outputs were delivered before a restart. The value is
// appended to the current chunk, which only grows until TakeOutputs hands
// it over, so values already emitted are never written again.
// jsonAppender is an output record that appends its own JSON encoding
// (the contract package's).
type jsonAppender interface{ AppendJSON([]byte) []byte }

func emit[T jsonAppender](w *Worker, r Record, kind string, v T) { // generic: v is not boxed in an interface
	if r.Offset < w.suppress[r.Topic] {
		return // already delivered before the restart
	}
	if cap(w.outBytes)-len(w.outBytes) < 512 {
		w.outBytes = make([]byte, 0, outputChunk)
	}
	start := len(w.outBytes)
	w.outBytes = v.AppendJSON(w.outBytes)
	w.out = append(w.out, Output{Kind: kind, Key: r.Key, Value: w.outBytes[start:len(w.outBytes):len(w.outBytes)],
		Source: Position{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, Headers: r.Trace.set(nil)})
}

// Process handles one record. Bad records become dead letters; only a
// cancelled context, a record of another partition or a failure of the key
// store (UseKeyStore) is an error.
func (w *Worker) Process(ctx context.Context, r Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.Partition != w.partition {
		return fmt.Errorf("worker of partition %d got a record of partition %d", w.partition, r.Partition)
	}
	if r.Topic != EventsTopic && r.Topic != LabelsTopic {
		return fmt.Errorf("unknown input topic index %d", r.Topic)
	}
	w.through[r.Topic] = max(w.through[r.Topic], r.Offset)
	if len(r.Key) > w.cfg.MaxKeyLength {
		w.deadLetter(r, ReasonKeyTooLong, fmt.Errorf("record key of %d bytes is over the key length bound of %d (DRIFTSTREAM_MAX_KEY_LENGTH): %w",
			len(r.Key), w.cfg.MaxKeyLength, topics.ErrInvalid))
		return nil
	}
	key := string(r.Key)
	if key == "" {
		w.deadLetter(r, ReasonMissingKey, errors.New("record has no key: the key names the entity whose learner it feeds"))
		return nil
	}
	if checkpoint.ReservedKey(key) || key == PopulationKey {
		w.deadLetter(r, ReasonInvalidEvent, fmt.Errorf("record key %s is reserved (the checkpoint store's prefix, or the population model's key)", topics.Excerpt(key)))
		return nil
	}
	ev, err := w.decode(r)
	if err != nil {
		w.deadLetter(r, ReasonInvalidEvent, err)
		return nil
	}
	if err := checkRange(ev, w.cfg.MaxAbsValue); err != nil {
		w.deadLetter(r, ReasonInvalidEvent, err)
		return nil
	}
	ks, ok := w.keys[key] // lookup, without a call per event (over the inlining budget)
	if !ok && w.cache != nil {
		if ks, ok, err = w.fault(key); err != nil {
			return err // the key store failed: the partition restores, rebuilding it
		}
	}
	if !ok && ev.Kind == topics.LabelRecord && r.Topic == EventsTopic {
		// A label for a key this partition has never seen: its event went to
		// another partition (the producers partition keys differently) or
		// never existed. Counted apart, and no learner is made for it.
		w.stats.LabelsUnknown++
		w.stats.LabelsNoKey++
		return nil
	}
	if !ok {
		if ks, err = w.newKey(key); err != nil {
			return err // the configuration was validated: this is a bug
		}
	}
	if r.Offset <= ks.applied[r.Topic] {
		w.stats.Skipped++ // absorbed before the checkpoint: replay must not apply it twice
		return nil
	}
	if r.Topic == LabelsTopic && ev.Kind != topics.LabelRecord {
		w.deadLetter(r, ReasonInvalidEvent, errors.New("the labels topic carries label records only ({\"id\",\"label\"})"))
		return nil
	}
	if ev.Kind == topics.Input && ks.awaiting(ev.ID) {
		// Its label could not tell the two apart: refused before it touches
		// the key, so that a replay refuses it again.
		w.deadLetter(r, ReasonInvalidEvent, fmt.Errorf("duplicate id %q: an earlier event of key %q with this id still awaits its label; ids must be unique per key: %w",
			ev.ID, key, topics.ErrInvalid))
		return nil
	}
	var handled error
	if ev.Kind == topics.Input && ev.Label == 0 {
		if i := slices.IndexFunc(ks.early(), func(e early) bool { return e.id == ev.ID }); i >= 0 {
			lw := ks.wait
			ev.Label = lw.early[i].label // its label came first on the labels topic
			lw.held -= lw.early[i].size()
			lw.early = slices.Delete(lw.early, i, i+1)
			w.stats.LabelsJoined++
		}
	}
	if ev.Kind == topics.LabelRecord {
		handled = w.label(r, key, ks, ev)
	} else {
		handled = w.event(r, key, ks, ev)
	}
	if handled != nil {
		w.deadLetter(r, ReasonRejected, handled)
		if !ok {
			return nil // a new key whose first record was refused is not kept
		}
		// The round may have drawn from the key's RNG: the key absorbed the
		// record, so a replay must not draw again.
	}
	if !ok {
		w.keys[key] = ks
		if w.cache != nil {
			w.cache.count++
		}
	}
	ks.applied[r.Topic] = r.Offset
	w.markDirty(key, ks)
	return nil
}

// decode is r's event: its Decoded one, or its value decoded by the
// contract.
func (w *Worker) decode(r Record) (topics.Event, error) {
	if r.Decoded != nil {
		return *r.Decoded, r.Decoded.Validate()
	}
	return topics.Decode(r.Value, w.cfg.MaxBytes)
}

// checkRange refuses input values whose magnitude exceeds max: one update
// with them can overflow a learner's state.
func checkRange(ev topics.Event, max float64) error {
	for i, v := range ev.X {
		if math.Abs(v) > max {
			return fmt.Errorf(`"x"[%d] = %g exceeds the input bound %g (DRIFTSTREAM_MAX_ABS_VALUE): scale or clip the inputs: %w`, i, v, max, topics.ErrInvalid)
		}
	}
	var over []string
	for name, v := range ev.Features {
		if math.Abs(v) > max {
			over = append(over, name)
		}
	}
	if len(over) > 0 { // the first by name: a replay dead-letters it with the same reason
		name := slices.Min(over)
		return fmt.Errorf("feature %s = %g exceeds the input bound %g (DRIFTSTREAM_MAX_ABS_VALUE): scale or clip the inputs (%d features over it): %w",
			topics.Excerpt(name), ev.Features[name], max, len(over), topics.ErrInvalid)
	}
	return nil
}

// guardNorm is the input norm above which a learning step is checked:
// below it (so every value is below it too) no learner's update can
// overflow from a finite state in one step; above it the state is
// snapshotted, and restored if the step made the learner's margin on x
// non-finite. The norm, not the largest value: one SIMD dot product
// (gonum's) costs a thirtieth of a scan through Vector.Entries
// (BenchmarkVectorChecks, learners, measures both).
const guardNorm = 1e6

// learn teaches the key's learner, leaving its state untouched when the step
// would make it non-finite (the learners' contract: on error, no change).
func (w *Worker) learn(ks *keyState, x learners.Vector, y int, p learners.Prediction) error {
	return w.guarded(ks, x, func() error { return ks.learner.Learn(x, y, p) })
}

// guarded runs step, a learning step of ks's learner on x, leaving the
// state untouched when it would make it non-finite.
func (w *Worker) guarded(ks *keyState, x learners.Vector, step func() error) error {
	sq := x.SquaredNorm()
	if sq <= guardNorm*guardNorm {
		return step()
	}
	before, err := ks.learner.MarshalBinary()
	if err != nil {
		return err
	}
	if err := step(); err != nil {
		return err
	}
	if q, err := ks.learner.Predict(x); err != nil || math.IsNaN(q.Score) || math.IsInf(q.Score, 0) {
		if uerr := ks.learner.UnmarshalBinary(before); uerr != nil {
			return fmt.Errorf("restore the state after a non-finite step: %w", uerr)
		}
		return fmt.Errorf("learning from this record (an input of norm %g) would make the learner's state non-finite; the key's state is unchanged: scale the inputs", math.Sqrt(sq))
	}
	return nil
}

// event predicts, emits, learns or queries.
func (w *Worker) event(r Record, key string, ks *keyState, ev topics.Event) error {
	x, err := w.cfg.Vector.Vector(ev)
	if err != nil {
		return err
	}
	if ks.std != nil { // scaled by the key's earlier inputs, then counted
		if x, err = ks.std.Next(x); err != nil {
			return err
		}
	}
	p, err := ks.learner.Predict(x)
	if err != nil {
		return err
	}
	w.expire(r, ks)
	var pop learners.Prediction // the population's, with a population model
	var sumLabel int
	var sum float64
	if w.additive {
		// The prediction is the sum's: a sampler asks by the whole model's
		// margin, as the margin rule reads it; the draw is the same one.
		if sumLabel, sum, pop, err = w.summed(x, p); err != nil {
			return err
		}
		p.QueryProb = ks.learner.(learners.Summand).QueryProbAt(sum)
	}
	// Decide the round before emitting, so the prediction message is final.
	p = ks.learner.Decide(p)
	label, score, popLabel := p.Label, p.Score, 0 // decided: a randomized learner's draw
	post, hasPost := p.Posterior, p.HasPosterior
	if w.additive {
		label, score = sumLabel, sum
		if hasPost { // a logistic key: the sum is its log-odds
			post = learners.Sigmoid(sum)
		}
	}
	// With the mixture the key picks whose prediction it makes (the
	// learner's own, or the population's); a sampler's own rule still
	// decides its queries, the margin rule reads the prediction made.
	if w.mixing() {
		if label, score, pop, err = w.mixed(ks, x, p); err != nil {
			return err
		}
		popLabel = pop.Label
		if ks.mix.followsPopulation() {
			post = pop.Posterior
		}
	}
	query, qprob := p.Query, p.QueryProb
	if !w.sampling && ev.Label == 0 { // margin rule for learners without one
		qprob, query = 0, false
		if b := w.cfg.QueryScale; b > 0 {
			qprob = b / (b + math.Abs(score))
			query = rand.New(&ks.query).Float64() < qprob
		}
	}
	msg := topics.Prediction{ID: ev.ID, Key: key, KeyB64: topics.KeyB64(key), Label: label, Score: score, Learner: w.cfg.Learner, Partition: r.Partition, Offset: r.Offset}
	if w.sampling {
		w.qprob = qprob // encoded at once: a field, not a fresh allocation per event
		msg.QueryProb = &w.qprob
	}
	if hasPost {
		w.post = post
		msg.Posterior = &w.post
	}
	w.stats.Events++
	ks.stats.events++
	w.stats.Predictions++
	if w.mixing() && ks.mix.followsPopulation() { // as mixed decided
		w.stats.FollowedPopulation++
	}
	if !w.sampling || p.Query {
		w.stats.Asked++
	}
	emit(w, r, OutPrediction, msg)
	// The label-free signals, once the event is handled: a sampler's own
	// query decision, or the margin rule's probability for the others.
	if len(w.cfg.Detectors) > 0 {
		ks.tick()
		askedValue := boolValue(p.Query)
		if !w.sampling {
			askedValue = 0
			if b := w.cfg.QueryScale; b > 0 {
				askedValue = b / (b + math.Abs(score))
			}
		}
		defer w.eventSignals(r, key, ks, askedValue, score, ev.ID, ev.TS)
	}
	if ev.Label != 0 {
		w.stats.Labeled++
		ks.stats.labeled++
		wrong := label != ev.Label
		if wrong {
			w.stats.Mistakes++
			ks.stats.mistakes++
		}
		w.last = Outcome{Time: ev.TS, Wrong: wrong, Expected: boolValue(wrong)}
		if !w.populated() {
			w.last.Expected = p.ExpectedMistake(ev.Label)
		}
		var err error
		if w.mixing() {
			err = w.scoreMixture(r, ks, popLabel != ev.Label, p.Label != ev.Label)
		}
		switch {
		case err != nil || !(w.learnAll || !w.sampling || query): // LearnQueried: a sampler's unasked label
		case w.additive:
			err = w.learnSum(ks, x, ev.Label, score)
		default:
			err = w.learn(ks, x, ev.Label, p)
		}
		if w.populated() && err == nil {
			err = w.teachPopulation(r, x, ev.Label, &pop, score)
		}
		w.outcome(r, key, ks, wrong, ev.ID, ev.TS)
		return err
	}
	if query {
		w.stats.Queries++
		emit(w, r, OutQuery, topics.LabelQuery{ID: ev.ID, Key: key, KeyB64: topics.KeyB64(key), Score: score, QueryProb: qprob, Partition: r.Partition, Offset: r.Offset})
	}
	// Every unlabeled event awaits its label, asked for or not: the label,
	// when it comes, scores this prediction, and is learned unless the
	// learner is a sampler that did not ask and only asked labels teach
	// (LearnQueried: then x need not be kept).
	q := pending{id: ev.ID, offset: r.Offset, decided: label, score: score, queried: query, ts: ev.TS, own: int8(p.Label), population: int8(popLabel)}
	switch {
	case w.learnAll || !w.sampling || query:
		q.x = x
	case w.populated(): // the population learns every label; the key only those it asked for
		q.x, q.populationOnly = x, true
	}
	lw := ks.waiting()
	w.stats.LabelsExpired += lw.await(q, w.cfg.MaxPending)
	lw.bound(w.cfg.MaxPendingBytes, &w.stats)
	return nil
}
