package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/topics"
)

// Worker processes one partition: it decodes each record, looks its key
// up, has the partition's keyed.Model step the key, and writes the Step's
// outputs; it checkpoints the keys it changed and restores them. It is not
// safe for concurrent use: one goroutine owns it, which is what makes
// per-key state lock-free.
type Worker struct {
	cfg        Config
	model      *keyed.Model
	recordHint int    // the last checkpoint's bytes per key record (TakeCheckpoint)
	stateBuf   []byte // a key-store record being written (spill, park), reused
	partition  int
	epoch      checkpoint.Epoch // written into every checkpoint record
	// digest is the partition's state as of the last checkpoint, as its
	// marker carries it (checkpoint's digest.go); unheldDigest the digests
	// of the keys whose latest record is counted in it but gave no state
	// (an unreadable one), which their next record replaces.
	digest       uint64
	unheldDigest map[string]uint64
	keys         map[string]*keyed.State
	// cache, when set, holds the keys beyond those in memory (UseKeyStore).
	cache *keyCache
	// dirty lists the keys changed since the last checkpoint (each held
	// key once: keyed.Mark.Dirty), in any order, and keys not held whose
	// records must be superseded.
	dirty   []dirtyKey
	early   earlyRecords // records of dirty keys encoded when they changed (dirty.go)
	through [2]int64     // last offset processed per topic
	// peers is the last offset processed of each other partition's input
	// topics, indexed by partition (SharedAcrossPartitions; peer.go).
	peers [][2]int64
	// reread is where the worker stands in re-reading the events topic for
	// the awaited inputs its keys' changelog records left out (reread.go).
	reread   reread
	suppress [2]int64 // outputs for offsets below these are not emitted (replay)
	out      []Output
	outBytes []byte       // the chunk outputs' values are appended to (emit)
	ev       topics.Event // the event being processed
	stats    Totals
	last     Outcome
	// lastWeight is the population model's weight in the mixture of the
	// key that made the last prediction (with the mixture).
	lastWeight float64
}

// Totals are a partition's cumulative counters (keyed's).
type Totals = keyed.Totals

// Outcome is a scored prediction (keyed's).
type Outcome = keyed.Outcome

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
	w := &Worker{cfg: cfg, partition: partition, keys: map[string]*keyed.State{}, through: [2]int64{-1, -1}, reread: noReread,
		early: earlyRecords{on: true}} // a worker's first keys are new: each changes once until they repeat
	var shared keyed.Shared
	if cfg.Population != keyed.PopulationOff {
		shared = population{w}
	}
	m, err := keyed.New(cfg.Settings, shared, &w.stats)
	if err != nil {
		return nil, err
	}
	w.model = m
	return w, nil
}

// population holds a worker's population model as a key of its own
// (keyed.PopulationKey): fenced, restored, kept, parked, evicted and
// replayed exactly as keys are.
type population struct{ w *Worker }

// Population returns the partition's population model, made on first use.
func (p population) Population() (*keyed.State, error) {
	w := p.w
	ps, ok, err := w.lookup(keyed.PopulationKey)
	if err != nil || ok {
		return ps, err
	}
	if ps, err = w.model.NewPopulation(); err != nil {
		return nil, err
	}
	w.keys[keyed.PopulationKey] = ps
	if w.cache != nil {
		w.cache.count++
	}
	w.markDirty(keyed.PopulationKey, ps) // checkpointed from its first day, as a key is
	return ps, nil
}

// PopulationChanged marks the population model for the next checkpoint.
func (p population) PopulationChanged(ps *keyed.State) { p.w.markDirty(keyed.PopulationKey, ps) }

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

// jsonAppender is an output record that appends its own JSON encoding
// (package topics's).
type jsonAppender interface{ AppendJSON([]byte) []byte }

// emit encodes v as the next output of kind, keyed by the record's key, unless
// the record's outputs were delivered before a restart. The value is
// appended to the current chunk, which only grows until TakeOutputs hands
// it over, so values already emitted are never written again.
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
	if r.Topic != EventsTopic && r.Topic != LabelsTopic {
		return fmt.Errorf("unknown input topic index %d", r.Topic)
	}
	if r.Partition != w.partition {
		return w.peer(r)
	}
	if w.reread.floor >= 0 && r.Topic == EventsTopic { // re-reading for awaited inputs (reread.go)
		switch {
		case r.Offset >= w.reread.until:
			w.reread = noReread // every restored key's awaited inputs were re-read
			w.model.ForgetMissing()
		case r.Offset < w.reread.keysFrom:
			return w.revisit(r) // absorbed by every key: only awaited inputs are read from it
		}
	}
	w.through[r.Topic] = max(w.through[r.Topic], r.Offset)
	key, ok := w.keyOf(r)
	if !ok {
		return nil // dead-lettered
	}
	ev, err := w.decode(r)
	if err == nil {
		err = checkRange(ev, w.cfg.MaxAbsValue)
	}
	if err != nil {
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
		if ks, err = w.model.NewState(key); err != nil {
			return err // the configuration was validated: this is a bug
		}
	}
	if r.Offset <= ks.Applied[r.Topic] {
		w.stats.Skipped++ // absorbed before the checkpoint: replay must not apply it twice
		w.ev = ev         // a field, as for Step: a local would escape
		w.refill(r, ks, &w.ev)
		return nil
	}
	w.ev = ev // the input points at a field: a local would escape (the Step's alerts keep strings of the input)
	st := w.model.Step(keyed.Input{Key: key, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Event: &w.ev}, ks)
	if st.Refused != nil {
		w.deadLetter(r, ReasonInvalidEvent, st.Refused)
		return nil
	}
	w.apply(r, st)
	if st.Failed != nil {
		w.deadLetter(r, ReasonRejected, st.Failed)
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
	ks.Applied[r.Topic] = r.Offset
	w.markDirty(key, ks)
	return nil
}

// apply writes a step's outputs, in order, and keeps what the counters
// report of it.
func (w *Worker) apply(r Record, st *keyed.Step) {
	if st.Predicted {
		emit(w, r, OutPrediction, &st.Prediction)
		w.lastWeight = st.PopulationWeight
	}
	if st.Queried {
		emit(w, r, OutQuery, &st.Query)
	}
	for i := range st.Alerts {
		emit(w, r, OutAlert, &st.Alerts[i])
	}
	if st.Scored {
		w.last = st.Outcome
	}
}

// keyOf is r's key, or false when the record is dead-lettered for it: too
// long, missing, or reserved.
func (w *Worker) keyOf(r Record) (string, bool) {
	if len(r.Key) > w.cfg.MaxKeyLength {
		w.deadLetter(r, ReasonKeyTooLong, fmt.Errorf("record key of %d bytes is over the key length bound of %d (DRIFTSTREAM_MAX_KEY_LENGTH): %w",
			len(r.Key), w.cfg.MaxKeyLength, topics.ErrInvalid))
		return "", false
	}
	key := string(r.Key)
	if key == "" {
		w.deadLetter(r, ReasonMissingKey, errors.New("record has no key: the key names the entity whose learner it feeds"))
		return "", false
	}
	if checkpoint.ReservedKey(key) || key == keyed.PopulationKey {
		w.deadLetter(r, ReasonInvalidEvent, fmt.Errorf("record key %s is reserved (the checkpoint store's prefix, or the population model's key)", topics.Excerpt(key)))
		return "", false
	}
	return key, true
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
