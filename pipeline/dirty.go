package pipeline

import (
	"cmp"

	"github.com/driftstream/driftstream/keyed"
)

// The keys changed since the last checkpoint, and the records of those a
// checkpoint would otherwise have to encode cold.
//
// A partition of many keys changes most of them once between two
// checkpoints. Encoded at the checkpoint, such a key's state — its learner,
// its detector, its awaited events — has long left the CPU's caches, and
// reading it back is most of the record's cost (BenchmarkShippedCPU's
// many-key runs). So while most keys change once an interval, a key's record
// is encoded when it first changes, from the state the step just touched,
// and the checkpoint takes those bytes as they are. A key that changes again
// has its early record dropped and is encoded at the checkpoint, once. The
// record's bytes are the same either way (a record is a function of the
// state, and every change of a held key ends in markDirty), so the choice
// is one of cost alone: TestEarlyRecordsAreTheCheckpointsRecords.

// dirtyKey is a key changed since the last checkpoint, with its state when
// the worker held it then. A held key stays in the worker's map, as that
// state, until the checkpoint that writes it (keys leave the map only when
// spilled, and a dirty key is never spilled before it is written), so the
// checkpoint reaches the state without looking the key up again; a key not
// held then is looked up at the checkpoint (replay may have rebuilt it).
type dirtyKey struct {
	key   string
	state *keyed.State
	// applied is the state's Applied when it last changed.
	applied [2]int64
	// early is its record, in a chunk of the early buffer, when encoded
	// since it last changed; nil when not.
	early []byte
	// again is set when the key changed more than once.
	again bool
}

// markDirty records that key changed since the last checkpoint; ks is the
// key's state, nil when the worker does not hold it. Every change of a
// held key's state ends in a call (Process, Reset, the population's
// PopulationChanged, a restore's unreadable keys): a record encoded when
// it was called is the state's until the next.
func (w *Worker) markDirty(key string, ks *keyed.State) {
	if ks == nil {
		w.dirty = append(w.dirty, dirtyKey{key: key})
		return
	}
	ks.Mark.Unstored = true
	if ks.Mark.Dirty { // changed again: its early record, if any, is not its state
		d := &w.dirty[ks.Mark.Slot]
		d.applied, d.early, d.again = ks.Applied, nil, true
		return
	}
	ks.Mark.Dirty, ks.Mark.Slot = true, int32(len(w.dirty))
	d := dirtyKey{key: key, state: ks, applied: ks.Applied}
	// The population model changes at most steps, and within a step
	// before it is done: never early.
	if w.early.on && key != keyed.PopulationKey {
		d.early = w.early.encode(w.model, ks)
	}
	w.dirty = append(w.dirty, d)
}

// earlyRecords is the buffer of the records encoded when their keys
// changed, and whether to encode them so: while at least half of the keys
// a checkpoint writes changed once since the last (decide). A key changed
// again costs its early record, encoded in vain; a partition of few keys,
// each changing many times an interval, encodes none early.
//
// The buffer is a series of chunks, each record in one, and a full chunk
// is followed by a new one rather than grown: an interval of 100,000 key
// records (RunnerConfig.CheckpointMaxEvery) is tens of MB, which growing
// one buffer would copy again and again.
type earlyRecords struct {
	on    bool
	buf   []byte // the chunk being filled
	force *bool  // tests: always (true) or never (false), whatever decide says
	// size is the capacity a new chunk starts with: the last checkpoint's
	// record bytes with a quarter to spare, within [minChunk, maxChunk];
	// hint is its bytes per record. A chunk with less than two records'
	// room left is followed by a new one.
	size, hint int
}

// The bounds of an early-record chunk's size; the size of the chunks, and
// the bytes a record is taken to hold, before a first checkpoint says.
const (
	minChunk   = 4 << 10
	maxChunk   = 1 << 20
	firstChunk = 64 << 10
	firstHint  = 256
)

// encode appends ks's changelog record to the buffer and returns it; nil
// when it could not be encoded (the checkpoint encodes it again, and fails
// with the reason).
func (e *earlyRecords) encode(m *keyed.Model, ks *keyed.State) []byte {
	if cap(e.buf)-len(e.buf) < 2*cmp.Or(e.hint, firstHint) {
		e.buf = make([]byte, 0, cmp.Or(e.size, firstChunk))
	}
	n := len(e.buf)
	b, err := m.AppendChangelog(e.buf, ks)
	if err != nil {
		return nil
	}
	e.buf = b // a record larger than the room left grew the chunk: the records before keep the old one
	return b[n:len(b):len(b)]
}

// taken starts a new chunk for the next interval, sized for a checkpoint
// of keys key records of hint bytes each: the checkpoint's records keep
// the chunks they are in. A checkpoint of no keys leaves the sizes as
// they were: nothing to go by.
func (e *earlyRecords) taken(keys, hint int) {
	e.buf = nil
	if keys > 0 {
		e.size, e.hint = min(max(keys*hint*5/4, minChunk), maxChunk), hint
	}
}

// decide sets whether the next interval's keys are encoded early: when at
// least half of the keys a checkpoint wrote (written) changed once (once).
// A checkpoint that wrote none leaves it as it was: nothing to go by. A new
// worker starts encoding early (NewWorker): its first keys are all new, and
// with many keys its first interval is long (RunnerConfig.CheckpointMaxEvery).
func (e *earlyRecords) decide(once, written int) {
	if written > 0 {
		e.on = once*2 >= written
	}
	if e.force != nil {
		e.on = *e.force
	}
}
