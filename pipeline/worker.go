// Package pipeline is driftstream's processing core (DESIGN.md §1): a Worker
// owns one input partition and every key on it, turns records into
// predictions, label queries and dead letters, learns from labels (inline or
// delayed), and checkpoints the keys it changed. It knows nothing of Kafka:
// the service, the backtest and the embedded demo feed it records and drain
// its outputs.
package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/drift"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

// Input topics, as indexes into applied-through offsets.
const (
	EventsTopic = 0
	LabelsTopic = 1
)

// Record is one input record.
type Record struct {
	Topic     int // EventsTopic or LabelsTopic
	Partition int
	Offset    int64
	Key       []byte
	Value     []byte
}

// Output kinds.
const (
	OutPrediction = "prediction"
	OutQuery      = "label-query"
	OutDeadLetter = "dead-letter"
)

// Output is one message for an output topic.
type Output struct {
	Kind  string
	Key   []byte
	Value []byte
	// Headers are set on dead letters (DeadLetter.Output).
	Headers map[string]string
	// Source is the input record the output came from: the original of a
	// dead letter that replaces an output the broker refuses.
	Source Position
}

// Position locates an input record.
type Position struct {
	Topic, Partition int // Topic: EventsTopic or LabelsTopic
	Offset           int64
}

// Config configures every worker of a service.
type Config struct {
	Learner string
	Params  json.RawMessage
	Seed    uint64
	Vector  topics.Vectorizer
	// MaxBytes bounds an input message (0: topics.DefaultMaxBytes).
	MaxBytes int
	// QueryScale is b of the margin rule b/(b+|score|) that asks for labels of
	// unlabeled events for learners without a native query rule; 0 never asks.
	QueryScale float64
	// MaxPending bounds the unlabeled events awaiting their label per key
	// (oldest dropped, counted as expired).
	MaxPending int
	// PendingTTL gives up an awaited label after this many later input
	// records of its partition (an offset distance: deterministic on replay).
	PendingTTL int64
	// MaxPendingBytes bounds the bytes of a key's pending queries and early
	// labels together (oldest dropped first, counted as expired); 0 means
	// DefaultMaxPendingBytes. With the learner's state it bounds a key record.
	MaxPendingBytes int
	// MaxKeyBytes bounds a key's checkpoint record; Validate refuses a
	// configuration whose learner and pending bounds could exceed it (a Kafka
	// changelog record must fit in one message). 0 means DefaultMaxKeyBytes;
	// negative means no limit (file and memory stores).
	MaxKeyBytes int64
	// MaxKeyMemory bounds one key's learner state in memory; 0 means
	// DefaultMaxKeyMemory.
	MaxKeyMemory int64
	// MaxAbsValue bounds the magnitude of every input value (0 means
	// DefaultMaxAbsValue): beyond it, one update can overflow a learner's
	// state (second-order learners square the inputs).
	MaxAbsValue float64
	// TopicNames name the input topics in dead-letter headers.
	TopicNames [2]string
	// MaxKeyLength bounds an input record's key (0: DefaultMaxKeyLength):
	// a longer one is dead-lettered (ReasonKeyTooLong) and gets no state.
	MaxKeyLength int
	// Outputs are the output topics' record limits; Validate refuses bounds
	// whose outputs could exceed them, and dead letters are cut to fit.
	Outputs OutputLimits
	// Detectors are the drift detectors run per key (package drift), each on
	// one signal; none by default.
	Detectors []DetectorSpec
	// OnDrift is what a confirmed drift does: OnDriftAlert (the default)
	// emits an alert, OnDriftReset also restarts the key's learner.
	OnDrift string
	// AlertCooldown is the number of a key's events after an alert during
	// which it raises no other (0: DefaultAlertCooldown).
	AlertCooldown int64
	// CooldownPerDetector applies the cooldown to each detector on its own
	// (scoring detectors side by side) rather than to the key.
	CooldownPerDetector bool
	// Standardize z-scores each key's inputs by the running statistics of
	// that key's earlier inputs (learners.Standardizer, checkpointed with the
	// key) before its learner sees them; dense inputs only.
	Standardize bool
	// Population is the learner of the partition's population model, which
	// learns every label and seeds each new key's learner (population.go):
	// the keys' learner, or PopulationOff (the default; "" means it).
	Population string
}

// Defaults of the bounds in Config.
const (
	DefaultMaxPendingBytes = 128 << 10
	// DefaultMaxKeyBytes leaves room under Kafka's default message.max.bytes
	// (1,048,588) for the record key and framing.
	DefaultMaxKeyBytes  = 900_000
	DefaultMaxKeyMemory = 256 << 20
	DefaultMaxAbsValue  = 1e12
	// MaxDeadLetterBytes bounds a dead letter's copy of the original record;
	// a longer one is cut and marked with a "truncated" header, so that a
	// dead letter of an oversized record still fits in a message.
	MaxDeadLetterBytes = 64 << 10
	// keyOverhead bounds a key record's framing, key and offsets besides the
	// learner snapshot, the pending entries and the drift detectors
	// (drift.MaxBytes each).
	keyOverhead = 1024
)

// ErrTooLarge reports a configuration whose per-key state cannot fit the
// configured limits.
var ErrTooLarge = errors.New("per-key state too large")

// Validate checks the configuration and fills defaults. It sizes the
// learner's state before building one, so that a configuration too large for
// memory or for one changelog message is refused with the figures instead of
// failing at run time (or allocating the state to find out).
func (c *Config) Validate() error {
	if c.MaxPendingBytes == 0 {
		c.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if c.MaxKeyBytes == 0 {
		c.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if c.MaxKeyMemory == 0 {
		c.MaxKeyMemory = DefaultMaxKeyMemory
	}
	if c.MaxAbsValue == 0 {
		c.MaxAbsValue = DefaultMaxAbsValue
	}
	if c.MaxPendingBytes < 0 || c.MaxKeyMemory < 0 || !(c.MaxAbsValue > 0) || math.IsInf(c.MaxAbsValue, 0) {
		return fmt.Errorf("max pending bytes %d, max key memory %d, max abs value %v: must be positive", c.MaxPendingBytes, c.MaxKeyMemory, c.MaxAbsValue)
	}
	if _, err := c.KeyRecordBytes(); err != nil {
		return err
	}
	if c.Standardize && c.Vector.Hasher != nil && c.Vector.DenseDim == 0 {
		return errors.New("standardize needs dense inputs (\"x\"): hashed named features would all become dense; scale them at the producer, or set a dense dimension")
	}
	if err := c.validatePopulation(); err != nil {
		return err
	}
	if err := c.validateDetectors(); err != nil {
		return err
	}
	if err := c.validateOutputs(); err != nil {
		return err
	}
	if _, err := learners.New(c.Learner, c.Params, learners.Config{Dim: c.Vector.Dim}); err != nil {
		return err
	}
	switch {
	case c.QueryScale < 0 || math.IsNaN(c.QueryScale):
		return fmt.Errorf("query scale %v: must be ≥ 0 (0 = never query)", c.QueryScale)
	case c.MaxPending < 0:
		return fmt.Errorf("max pending %d: must be ≥ 0", c.MaxPending)
	case c.PendingTTL < 0:
		return fmt.Errorf("pending TTL %d: must be ≥ 0", c.PendingTTL)
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.PendingTTL == 0 {
		c.PendingTTL = DefaultPendingTTL
	}
	if c.TopicNames[0] == "" {
		c.TopicNames = [2]string{"events", "labels"}
	}
	return nil
}

// The defaults of MaxPending and PendingTTL, the same for the service
// (config's DRIFTSTREAM_MAX_PENDING and DRIFTSTREAM_PENDING_TTL) and the
// backtests.
const (
	DefaultMaxPending = 1000
	DefaultPendingTTL = 1_000_000
)

// KeyRecordBytes bounds one key's checkpoint record: the learner's largest
// snapshot, the pending bytes bound and framing. It fails with ErrTooLarge,
// naming the sizes and what to change, when that exceeds MaxKeyBytes or the
// learner's state exceeds MaxKeyMemory. Call it on a validated Config.
func (c *Config) KeyRecordBytes() (int64, error) {
	state, err := learners.StateBytes(c.Learner, c.Params, c.Vector.Dim)
	if err != nil {
		return 0, err
	}
	if state > c.MaxKeyMemory {
		return 0, fmt.Errorf("learner %s in dimension %d holds up to %s per key, over the per-key memory budget of %s: lower the dimension (or hash bits), use a diagonal or first-order learner, or raise DRIFTSTREAM_MAX_KEY_MEMORY: %w",
			c.Learner, c.Vector.Dim, byteSize(state), byteSize(c.MaxKeyMemory), ErrTooLarge)
	}
	if c.Standardize {
		state += 16*int64(c.Vector.Dim) + 32 // mean and spread per coordinate
	}
	detectors := int64(0)
	for _, d := range c.Detectors {
		n, err := drift.MaxBytes(d.Detector, d.Params)
		if err != nil {
			return 0, err
		}
		detectors += int64(n) + 16 // its length, since-count and flags
	}
	total := state + int64(c.MaxPendingBytes) + keyOverhead + detectors
	if c.MaxKeyBytes > 0 && total > c.MaxKeyBytes {
		return 0, fmt.Errorf("a key record of learner %s in dimension %d can reach %s (state %s + pending queries %s), over DRIFTSTREAM_MAX_KEY_BYTES = %s, which must stay below the broker's message.max.bytes (1 MB by default): lower the dimension (or hash bits), use a diagonal learner (\"diagonal\": true) or a first-order one, lower DRIFTSTREAM_MAX_PENDING_BYTES, or raise both limits together: %w",
			c.Learner, c.Vector.Dim, byteSize(total), byteSize(state), byteSize(int64(c.MaxPendingBytes)), byteSize(c.MaxKeyBytes), ErrTooLarge)
	}
	return total, nil
}

// byteSize prints a size in bytes with a binary unit.
func byteSize(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit && exp < 5; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(b)/float64(div), "KMGTPE"[exp], b)
}

// Dead-letter reasons, the values of the metric label and of the counters above.
const (
	ReasonMissingKey   = "missing_key"
	ReasonKeyTooLong   = "key_too_long"
	ReasonInvalidEvent = "invalid_event"
	ReasonRejected     = "rejected_by_learner"
	// ReasonOutputTooLarge and ReasonOutputInvalid are the dead letters that
	// replace an output the broker refused as too large, or as an invalid
	// or corrupt record (made by the service's sink, not by a worker).
	ReasonOutputTooLarge = "output_too_large"
	ReasonOutputInvalid  = "output_invalid"
)

// Reasons are every dead-letter reason.
var Reasons = []string{ReasonMissingKey, ReasonKeyTooLong, ReasonInvalidEvent, ReasonRejected, ReasonOutputTooLarge, ReasonOutputInvalid}

// OutputKinds are every output kind.
var OutputKinds = []string{OutPrediction, OutQuery, OutDeadLetter, OutAlert}

// pending is a label query waiting for its label. It keeps the prediction
// decided for the event, so that the label, when it comes, scores that
// prediction (a delayed label counts as labeled, and as a mistake when the
// decided label was wrong) before it is learned.
type pending struct {
	id     string
	offset int64
	x      learners.Vector
	// decided is the label predicted for the event, 0 when unknown (a key
	// state written before predictions were kept); score is its margin.
	decided int
	score   float64
	// queried is set when a label query was emitted for the event. x is
	// kept only when the label will be learned (zero otherwise); with
	// populationOnly, by the population model alone (a sampler's key did
	// not ask for it).
	queried        bool
	populationOnly bool
	// own and population are the key's learner's and the population
	// model's labels for the event when a population model mixes them (0
	// otherwise): the label, when it comes, updates the key's mixture.
	own, population int8
	// ts is the event's time, zero when it had none.
	ts time.Time
}

// learnable reports whether the awaited label will be learned by the key.
func (p pending) learnable() bool { return p.x.Dim() > 0 && !p.populationOnly }

// early is a label from the labels topic that arrived before its event: the
// two topics are read concurrently, so their interleaving is arbitrary.
type early struct {
	id     string
	label  int
	offset int64 // labels-topic offset, for the TTL
}

// keyState is everything a key owns. It is kept small (112 bytes): what
// only some keys use — events awaiting their labels, early labels, resets
// and alerts — hangs off pointers that stay nil until a key needs them.
type keyState struct {
	learner learners.Learner
	query   rand.PCG // margin-rule draws, for learners without a native rule
	applied [2]int64
	stats   keyStats
	// wait holds the key's events awaiting their labels and its early
	// labels; nil until the first of either.
	wait *labelWait
	// watch holds the key's drift detectors.
	watch *watch
	// mix weighs the key's learner against the population model; nil
	// without a population model.
	mix *mixture
	std *learners.Standardizer // nil unless Config.Standardize
	// dirty is set while the key is in Worker.dirty: changed since the last
	// checkpoint.
	dirty bool
	// unstored is set, with a key store, while the key's state in memory is
	// newer than its record there (or it has none): evicting it writes it.
	unstored bool
}

// labelWait is what a key holds between an event and its label.
type labelWait struct {
	pending []pending // in offset order; add and drop through await, dropAwaited, unawait
	// awaited counts the ids in pending, so that a new event's duplicate id
	// and a label's event are found without a scan.
	awaited map[string]int32
	early   []early // labels-topic labels waiting for their event, in arrival order
	// held is the bytes of pending and early, bounded by MaxPendingBytes.
	held int
}

// waiting returns the key's label wait, made on first use.
func (ks *keyState) waiting() *labelWait {
	if ks.wait == nil {
		ks.wait = &labelWait{awaited: map[string]int32{}}
	}
	return ks.wait
}

// pending is the key's events awaiting their labels, oldest first.
func (ks *keyState) pending() []pending {
	if ks.wait == nil {
		return nil
	}
	return ks.wait.pending
}

// early is the key's labels waiting for their events, oldest first.
func (ks *keyState) early() []early {
	if ks.wait == nil {
		return nil
	}
	return ks.wait.early
}

// Sizes of pending entries, as counted against MaxPendingBytes.
func (p pending) size() int { return len(p.id) + 48 + p.x.NNZ()*12 }
func (e early) size() int   { return len(e.id) + 24 }

// await adds q to the key's events awaiting their label, the oldest dropped
// past max entries; it returns how many it dropped.
func (lw *labelWait) await(q pending, max int) int64 {
	lw.pending = append(lw.pending, q)
	lw.held += q.size()
	lw.awaited[q.id]++
	if len(lw.pending) > max {
		lw.dropAwaited(1)
		return 1
	}
	return 0
}

// dropAwaited drops the n oldest awaited events.
func (lw *labelWait) dropAwaited(n int) {
	for _, p := range lw.pending[:n] {
		lw.held -= p.size()
		lw.forget(p.id)
	}
	lw.pending = lw.pending[n:]
}

// unawait removes awaited event i (its label came).
func (lw *labelWait) unawait(i int) {
	lw.held -= lw.pending[i].size()
	lw.forget(lw.pending[i].id)
	lw.pending = slices.Delete(lw.pending, i, i+1)
}

func (lw *labelWait) forget(id string) {
	if lw.awaited[id]--; lw.awaited[id] <= 0 {
		delete(lw.awaited, id)
	}
}

// awaiting reports whether an event with id awaits its label.
func (ks *keyState) awaiting(id string) bool { return ks.wait != nil && ks.wait.awaited[id] > 0 }

// bound drops the oldest pending queries, then the oldest early labels,
// until the key holds at most max bytes of them.
func (lw *labelWait) bound(max int, stats *Totals) {
	for lw.held > max && len(lw.pending) > 0 {
		lw.dropAwaited(1)
		stats.LabelsExpired++
	}
	for lw.held > max && len(lw.early) > 0 {
		lw.held -= lw.early[0].size()
		lw.early = lw.early[1:]
		stats.LabelsUnknown++
	}
}

// Worker processes one partition. It is not safe for concurrent use: one
// goroutine owns it, which is what makes per-key state lock-free.
type Worker struct {
	cfg       Config
	maker     *learners.Maker // the keys' learners, parameters decoded once
	partition int
	epoch     checkpoint.Epoch // written into every checkpoint record
	sampling  bool
	populate  bool // a population model (Config.Population)
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
	info, _ := learners.Lookup(cfg.Learner)
	maker, err := learners.NewMaker(cfg.Learner, cfg.Params, cfg.Vector.Dim)
	if err != nil {
		return nil, err
	}
	return &Worker{cfg: cfg, maker: maker, partition: partition, sampling: info.Sampling, populate: cfg.Population != PopulationOff, keys: map[string]*keyState{},
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

// newKey is the state of a key seen for the first time: its learner and
// margin rule draw from the key's own streams.
func (w *Worker) newKey(key string) (*keyState, error) {
	ks, err := w.blankKey(learners.Config{Dim: w.cfg.Vector.Dim, Seed: w.cfg.Seed, Key: key})
	if err != nil {
		return nil, err
	}
	if err := w.seed(ks.learner); err != nil {
		return nil, err
	}
	ks.query = learners.KeyStream(w.cfg.Seed, key+"\x00query")
	return ks, nil
}

// blankKey is a key's state with its learner built for lcfg and no margin
// stream. A restore fills every stream from the key's record (the learners'
// snapshots carry theirs: TestSnapshotCarriesEveryStream), so it builds
// unseeded: hashing each key twice was a fifth of decoding it.
func (w *Worker) blankKey(lcfg learners.Config) (*keyState, error) {
	l, err := w.maker.New(lcfg)
	if err != nil {
		return nil, err
	}
	wt, err := w.newWatch()
	if err != nil {
		return nil, err
	}
	ks := &keyState{learner: l, watch: wt, applied: [2]int64{checkpoint.NoOffset, checkpoint.NoOffset}}
	if w.cfg.Standardize {
		if ks.std, err = learners.NewStandardizer(w.cfg.Vector.Dim); err != nil {
			return nil, err
		}
	}
	return ks, nil
}

// newLearner is a fresh learner for key (a reset): drawing from the key's
// stream, or a copy of the population model when there is one.
func (w *Worker) newLearner(key string) (learners.Learner, error) {
	l, err := w.maker.New(learners.Config{Dim: w.cfg.Vector.Dim, Seed: w.cfg.Seed, Key: key})
	if err == nil {
		err = w.seed(l)
	}
	return l, err
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
	d := DeadLetter{Reason: class, Err: err, SourceTopic: w.cfg.TopicNames[r.Topic], Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
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
func emit[T jsonAppender](w *Worker, r Record, kind string, v T) { // generic: v is not boxed in an interface
	if r.Offset < w.suppress[r.Topic] {
		return // already delivered before the restart
	}
	if cap(w.outBytes)-len(w.outBytes) < 512 {
		w.outBytes = make([]byte, 0, outputChunk)
	}
	start := len(w.outBytes)
	w.outBytes = v.appendJSON(w.outBytes)
	w.out = append(w.out, Output{Kind: kind, Key: r.Key, Value: w.outBytes[start:len(w.outBytes):len(w.outBytes)],
		Source: Position{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}})
}

// predictionMsg and queryMsg are the DESIGN §2 output contracts.
type predictionMsg struct {
	ID        string   `json:"id"`
	Key       string   `json:"key"`
	Label     int      `json:"label"`
	Score     float64  `json:"score"`
	Learner   string   `json:"learner"`
	Partition int      `json:"partition"`
	Offset    int64    `json:"offset"`
	QueryProb *float64 `json:"query_prob,omitempty"`
}

type queryMsg struct {
	ID        string  `json:"id"`
	Key       string  `json:"key"`
	Score     float64 `json:"score"`
	QueryProb float64 `json:"query_prob"`
	Partition int     `json:"partition"`
	Offset    int64   `json:"offset"`
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
	ev, err := topics.Decode(r.Value, w.cfg.MaxBytes)
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

// guardAbs is the input magnitude above which a learning step is checked:
// below it no learner's update can overflow from a finite state in one step;
// above it the state is snapshotted, and restored if the step made the
// learner's margin on x non-finite.
const guardAbs = 1e6

// learn teaches the key's learner, leaving its state untouched when the step
// would make it non-finite (the learners' contract: on error, no change).
func (w *Worker) learn(ks *keyState, x learners.Vector, y int, p learners.Prediction) error {
	big := 0.0
	x.Entries(func(_ int, v float64) { big = max(big, math.Abs(v)) })
	if big <= guardAbs {
		return ks.learner.Learn(x, y, p)
	}
	before, err := ks.learner.MarshalBinary()
	if err != nil {
		return err
	}
	if err := ks.learner.Learn(x, y, p); err != nil {
		return err
	}
	if q, err := ks.learner.Predict(x); err != nil || math.IsNaN(q.Score) || math.IsInf(q.Score, 0) {
		if uerr := ks.learner.UnmarshalBinary(before); uerr != nil {
			return fmt.Errorf("restore the state after a non-finite step: %w", uerr)
		}
		return fmt.Errorf("learning from this record (values up to %g) would make the learner's state non-finite; the key's state is unchanged: scale the inputs", big)
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
	// Decide the round before emitting, so the prediction message is final.
	p = ks.learner.Decide(p)
	// With a population model the key's mixture picks whose prediction it
	// makes (the learner's own, or the population's); a sampler's own rule
	// still decides its queries, the margin rule reads the prediction made.
	label, score, popLabel := p.Label, p.Score, 0
	var pop learners.Prediction // the population's, with a population model
	if w.populated() {
		if label, score, pop, err = w.mixed(ks, x, p); err != nil {
			return err
		}
		popLabel = pop.Label
	}
	query, qprob := p.Query, p.QueryProb
	if !w.sampling && ev.Label == 0 { // margin rule for learners without one
		qprob, query = 0, false
		if b := w.cfg.QueryScale; b > 0 {
			qprob = b / (b + math.Abs(score))
			query = rand.New(&ks.query).Float64() < qprob
		}
	}
	msg := predictionMsg{ID: ev.ID, Key: key, Label: label, Score: score, Learner: w.cfg.Learner, Partition: r.Partition, Offset: r.Offset}
	if w.sampling {
		w.qprob = qprob // encoded at once: a field, not a fresh allocation per event
		msg.QueryProb = &w.qprob
	}
	w.stats.Events++
	ks.stats.events++
	w.stats.Predictions++
	if w.populated() && ks.mix.followsPopulation() { // as mixed decided
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
		w.last = Outcome{Time: ev.TS, Wrong: wrong}
		var err error
		if w.populated() {
			ks.mix.update(popLabel != ev.Label, p.Label != ev.Label)
		}
		if !w.sampling || query { // samplers learn only the labels they asked for
			err = w.learn(ks, x, ev.Label, p)
		}
		if w.populated() && err == nil {
			err = w.teachPopulation(r, x, ev.Label, &pop)
		}
		w.outcome(r, key, ks, wrong, ev.ID, ev.TS)
		return err
	}
	if query {
		w.stats.Queries++
		emit(w, r, OutQuery, queryMsg{ID: ev.ID, Key: key, Score: score, QueryProb: qprob, Partition: r.Partition, Offset: r.Offset})
	}
	// Every unlabeled event awaits its label, asked for or not: the label,
	// when it comes, scores this prediction, and is learned unless the
	// learner is a sampler that did not ask (then x need not be kept).
	q := pending{id: ev.ID, offset: r.Offset, decided: label, score: score, queried: query, ts: ev.TS, own: int8(p.Label), population: int8(popLabel)}
	switch {
	case !w.sampling || query:
		q.x = x
	case w.populated(): // the population learns every label; the key only those it asked for
		q.x, q.populationOnly = x, true
	}
	lw := ks.waiting()
	w.stats.LabelsExpired += lw.await(q, w.cfg.MaxPending)
	lw.bound(w.cfg.MaxPendingBytes, &w.stats)
	return nil
}

// sized is an entry counted against a key's byte bound.
type sized interface{ size() int }

// push appends e to list, keeps at most max entries (dropping the oldest),
// and accounts their bytes in held. It returns the list and the number of
// entries dropped.
func push[T sized](list []T, e T, max int, held *int) ([]T, int64) {
	list = append(list, e)
	*held += e.size()
	if len(list) > max {
		*held -= list[0].size()
		return list[1:], 1
	}
	return list, 0
}

// expire drops awaited events older than the TTL.
func (w *Worker) expire(r Record, ks *keyState) {
	pend, n := ks.pending(), 0
	for n < len(pend) && r.Offset-pend[n].offset > w.cfg.PendingTTL {
		n++
	}
	if n > 0 {
		ks.wait.dropAwaited(n)
		w.stats.LabelsExpired += int64(n)
	}
}

// label joins a label record to its pending query and learns.
func (w *Worker) label(r Record, key string, ks *keyState, ev topics.Event) error {
	w.expire(r, ks)
	i := -1
	if ks.awaiting(ev.ID) {
		i = slices.IndexFunc(ks.wait.pending, func(p pending) bool { return p.id == ev.ID })
	}
	if i < 0 && r.Topic == LabelsTopic {
		// Possibly ahead of its event on the other topic: keep it (bounded, TTL'd).
		lw, n := ks.waiting(), 0
		for n < len(lw.early) && r.Offset-lw.early[n].offset > w.cfg.PendingTTL {
			n++
		}
		w.stats.LabelsUnknown += int64(n)
		for _, e := range lw.early[:n] {
			lw.held -= e.size()
		}
		var dropped int64
		lw.early, dropped = push(lw.early[n:], early{id: ev.ID, label: ev.Label, offset: r.Offset}, w.cfg.MaxPending, &lw.held)
		w.stats.LabelsUnknown += dropped
		lw.bound(w.cfg.MaxPendingBytes, &w.stats)
		return nil
	}
	if i < 0 {
		w.stats.LabelsUnknown++ // unknown or expired id: counted, never retried
		return nil
	}
	q := ks.wait.pending[i]
	x := q.x
	ks.wait.unawait(i)
	w.stats.LabelsJoined++
	scored := q.decided != 0 // the prediction made when the event came
	if q.population != 0 && ks.mix != nil {
		ks.mix.update(int(q.population) != ev.Label, int(q.own) != ev.Label)
	}
	if scored {
		w.stats.Labeled++
		ks.stats.labeled++
		w.stats.DelayedLabeled++
		if q.decided != ev.Label {
			w.stats.Mistakes++
			ks.stats.mistakes++
		}
		w.last = Outcome{Time: q.ts, Wrong: q.decided != ev.Label}
	}
	var err error
	if q.learnable() { // not a sampler's label it did not ask for
		var p learners.Prediction
		if p, err = ks.learner.Predict(x); err == nil { // the state moved on since the event: learn from the current one
			err = w.learn(ks, x, ev.Label, p)
		}
	}
	if w.populated() && x.Dim() > 0 && err == nil {
		err = w.teachPopulation(r, x, ev.Label, nil)
	}
	if scored {
		w.outcome(r, key, ks, q.decided != ev.Label, ev.ID, q.ts)
	}
	return err
}
