// Package pipeline is driftstream's processing core (DESIGN.md §1): a Worker
// owns one input partition and every key on it, turns records into
// predictions, label queries and dead letters, learns from labels (inline or
// delayed), and checkpoints the keys it changed. It knows nothing of Kafka:
// the service, the backtest and the embedded demo feed it records and drain
// its outputs.
package pipeline

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/driftstream/driftstream/checkpoint"
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
	// Headers are set on dead letters: error, source-topic, partition, offset.
	Headers map[string]string
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
	// MaxPending bounds the pending label queries per key (oldest dropped).
	MaxPending int
	// PendingTTL expires a pending query after this many later input records
	// of its partition (an offset distance: deterministic on replay).
	PendingTTL int64
	// TopicNames name the input topics in dead-letter headers.
	TopicNames [2]string
}

// Validate checks the configuration and fills defaults.
func (c *Config) Validate() error {
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
		c.MaxPending = 1000
	}
	if c.PendingTTL == 0 {
		c.PendingTTL = 1 << 40
	}
	if c.TopicNames[0] == "" {
		c.TopicNames = [2]string{"events", "labels"}
	}
	return nil
}

// Totals are a worker's cumulative counters: plain fields, cheap enough to
// read after every record.
type Totals struct {
	Events, Predictions, Queries, Labeled, Mistakes int64
	LabelsJoined, LabelsUnknown, LabelsExpired      int64
	// Dead letters by reason; DeadLetters is their sum.
	MissingKey, InvalidEvent, Rejected, DeadLetters int64
	// Skipped counts replayed records a key had already absorbed.
	Skipped int64
}

// Dead-letter reasons, the values of the metric label and of the counters above.
const (
	ReasonMissingKey   = "missing_key"
	ReasonInvalidEvent = "invalid_event"
	ReasonRejected     = "rejected_by_learner"
)

// Totals returns the cumulative counters.
func (w *Worker) Totals() Totals { return w.stats }

// pending is a label query waiting for its label.
type pending struct {
	id     string
	offset int64
	x      learners.Vector
}

// early is a label from the labels topic that arrived before its event: the
// two topics are read concurrently, so their interleaving is arbitrary.
type early struct {
	id     string
	label  int
	offset int64 // labels-topic offset, for the TTL
}

// keyState is everything a key owns.
type keyState struct {
	learner learners.Learner
	query   rand.PCG // margin-rule draws, for learners without a native rule
	rng     *rand.Rand
	pending []pending // in offset order
	early   []early   // labels-topic labels waiting for their event, in arrival order
	applied [2]int64
}

// Worker processes one partition. It is not safe for concurrent use: one
// goroutine owns it, which is what makes per-key state lock-free.
type Worker struct {
	cfg       Config
	partition int
	sampling  bool
	keys      map[string]*keyState
	dirty     map[string]bool
	through   [2]int64 // last offset processed per topic
	suppress  [2]int64 // outputs for offsets below these are not emitted (replay)
	out       []Output
	stats     Totals
}

// NewWorker returns a worker for a partition with no state.
func NewWorker(cfg Config, partition int) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	info, _ := learners.Lookup(cfg.Learner)
	return &Worker{cfg: cfg, partition: partition, sampling: info.Sampling, keys: map[string]*keyState{},
		dirty: map[string]bool{}, through: [2]int64{-1, -1}}, nil
}

// Keys is the number of keys held.
func (w *Worker) Keys() int { return len(w.keys) }

// TakeOutputs returns the outputs produced since the last call.
func (w *Worker) TakeOutputs() []Output {
	out := w.out
	w.out = nil
	return out
}

func (w *Worker) newKey(key string) (*keyState, error) {
	l, err := learners.New(w.cfg.Learner, w.cfg.Params, learners.Config{Dim: w.cfg.Vector.Dim, Seed: w.cfg.Seed, Key: key})
	if err != nil {
		return nil, err
	}
	ks := &keyState{learner: l, query: learners.KeyStream(w.cfg.Seed, key+"\x00query"), applied: [2]int64{checkpoint.NoOffset, checkpoint.NoOffset}}
	ks.rng = rand.New(&ks.query)
	return ks, nil
}

// deadLetter emits the original bytes with the reason.
func (w *Worker) deadLetter(r Record, class string, err error) {
	w.stats.DeadLetters++
	switch class {
	case ReasonMissingKey:
		w.stats.MissingKey++
	case ReasonInvalidEvent:
		w.stats.InvalidEvent++
	default:
		w.stats.Rejected++
	}
	if r.Offset < w.suppress[r.Topic] {
		return
	}
	w.out = append(w.out, Output{Kind: OutDeadLetter, Key: r.Key, Value: r.Value, Headers: map[string]string{
		"error": err.Error(), "source-topic": w.cfg.TopicNames[r.Topic],
		"partition": strconv.Itoa(r.Partition), "offset": strconv.FormatInt(r.Offset, 10)}})
}

func (w *Worker) emit(r Record, kind string, key string, v any) {
	if r.Offset < w.suppress[r.Topic] {
		return // already delivered before the restart
	}
	b, _ := json.Marshal(v) // plain structs of strings and numbers: cannot fail
	w.out = append(w.out, Output{Kind: kind, Key: []byte(key), Value: b})
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
// cancelled context or a record of another partition is an error.
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
	key := string(r.Key)
	if key == "" {
		w.deadLetter(r, ReasonMissingKey, errors.New("record has no key: the key names the entity whose learner it feeds"))
		return nil
	}
	ev, err := topics.Decode(r.Value, w.cfg.MaxBytes)
	if err != nil {
		w.deadLetter(r, ReasonInvalidEvent, err)
		return nil
	}
	ks, ok := w.keys[key]
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
	var handled error
	if ev.Kind == topics.Input && ev.Label == 0 {
		if i := slices.IndexFunc(ks.early, func(e early) bool { return e.id == ev.ID }); i >= 0 {
			ev.Label = ks.early[i].label // its label came first on the labels topic
			ks.early = slices.Delete(ks.early, i, i+1)
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
		return nil
	}
	if !ok {
		w.keys[key] = ks
	}
	ks.applied[r.Topic] = r.Offset
	w.dirty[key] = true
	return nil
}

// event predicts, emits, learns or queries.
func (w *Worker) event(r Record, key string, ks *keyState, ev topics.Event) error {
	x, err := w.cfg.Vector.Vector(ev)
	if err != nil {
		return err
	}
	p, err := ks.learner.Predict(x)
	if err != nil {
		return err
	}
	w.expire(r, ks)
	// Decide the round before emitting, so the prediction message is final.
	p = ks.learner.Decide(p)
	query, qprob := p.Query, p.QueryProb
	if !w.sampling && ev.Label == 0 { // margin rule for learners without one
		qprob, query = 0, false
		if b := w.cfg.QueryScale; b > 0 {
			qprob = b / (b + math.Abs(p.Score))
			query = ks.rng.Float64() < qprob
		}
	}
	msg := predictionMsg{ID: ev.ID, Key: key, Label: p.Label, Score: p.Score, Learner: w.cfg.Learner, Partition: r.Partition, Offset: r.Offset}
	if w.sampling {
		msg.QueryProb = &qprob
	}
	w.stats.Events++
	w.stats.Predictions++
	w.emit(r, OutPrediction, key, msg)
	if ev.Label != 0 {
		w.stats.Labeled++
		if p.Label != ev.Label {
			w.stats.Mistakes++
		}
		if !w.sampling || query { // samplers learn only the labels they asked for
			return ks.learner.Learn(x, ev.Label, p)
		}
		return nil
	}
	if query {
		w.stats.Queries++
		w.emit(r, OutQuery, key, queryMsg{ID: ev.ID, Key: key, Score: p.Score, QueryProb: qprob, Partition: r.Partition, Offset: r.Offset})
		ks.pending = append(ks.pending, pending{id: ev.ID, offset: r.Offset, x: x})
		if len(ks.pending) > w.cfg.MaxPending {
			ks.pending = ks.pending[1:]
			w.stats.LabelsExpired++
		}
	}
	return nil
}

// expire drops pending queries older than the TTL.
func (w *Worker) expire(r Record, ks *keyState) {
	n := 0
	for n < len(ks.pending) && r.Offset-ks.pending[n].offset > w.cfg.PendingTTL {
		n++
	}
	if n > 0 {
		ks.pending = ks.pending[n:]
		w.stats.LabelsExpired += int64(n)
	}
}

// label joins a label record to its pending query and learns.
func (w *Worker) label(r Record, key string, ks *keyState, ev topics.Event) error {
	w.expire(r, ks)
	i := slices.IndexFunc(ks.pending, func(p pending) bool { return p.id == ev.ID })
	if i < 0 && r.Topic == LabelsTopic {
		// Possibly ahead of its event on the other topic: keep it (bounded, TTL'd).
		n := 0
		for n < len(ks.early) && r.Offset-ks.early[n].offset > w.cfg.PendingTTL {
			n++
		}
		w.stats.LabelsUnknown += int64(n)
		ks.early = append(ks.early[n:], early{id: ev.ID, label: ev.Label, offset: r.Offset})
		if len(ks.early) > w.cfg.MaxPending {
			ks.early = ks.early[1:]
			w.stats.LabelsUnknown++
		}
		return nil
	}
	if i < 0 {
		w.stats.LabelsUnknown++ // unknown or expired id: counted, never retried
		return nil
	}
	x := ks.pending[i].x
	ks.pending = slices.Delete(ks.pending, i, i+1)
	w.stats.LabelsJoined++
	p, err := ks.learner.Predict(x) // the state moved on since the query: judge by the current one
	if err != nil {
		return err
	}
	return ks.learner.Learn(x, ev.Label, p)
}

// encodeState serializes a key: learner snapshot, margin-rule RNG, pending queries.
func encodeState(ks *keyState) ([]byte, error) {
	snap, err := ks.learner.MarshalBinary()
	if err != nil {
		return nil, err
	}
	rng, _ := ks.query.MarshalBinary()
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(snap)))
	b = append(b, snap...)
	b = binary.AppendUvarint(b, uint64(len(rng)))
	b = append(b, rng...)
	b = binary.AppendUvarint(b, uint64(len(ks.pending)))
	for _, p := range ks.pending {
		b = binary.AppendUvarint(b, uint64(len(p.id)))
		b = append(b, p.id...)
		b = binary.AppendVarint(b, p.offset)
		enc := encodeVector(p.x)
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	b = binary.AppendUvarint(b, uint64(len(ks.early)))
	for _, e := range ks.early {
		b = binary.AppendUvarint(b, uint64(len(e.id)))
		b = append(b, e.id...)
		b = binary.AppendVarint(b, int64(e.label))
		b = binary.AppendVarint(b, e.offset)
	}
	return b, nil
}
