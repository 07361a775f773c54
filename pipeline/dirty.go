package pipeline

import "github.com/driftstream/driftstream/keyed"

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
	// at and end are its record in the early buffer when encoded since it
	// last changed; end is −1 when not.
	at, end int32
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
		w.dirty = append(w.dirty, dirtyKey{key: key, end: -1})
		return
	}
	ks.Mark.Unstored = true
	if ks.Mark.Dirty { // changed again: its early record, if any, is not its state
		d := &w.dirty[ks.Mark.Slot]
		d.applied, d.end, d.again = ks.Applied, -1, true
		return
	}
	ks.Mark.Dirty, ks.Mark.Slot = true, int32(len(w.dirty))
	d := dirtyKey{key: key, state: ks, applied: ks.Applied, end: -1}
	// The population model changes at most steps, and within a step
	// before it is done: never early.
	if w.early.on && key != keyed.PopulationKey {
		d.at, d.end = w.early.encode(w.model, ks)
	}
	w.dirty = append(w.dirty, d)
}

// earlyRecords is the buffer of the records encoded when their keys
// changed, and whether to encode them so: while at least half of the keys
// a checkpoint writes changed once since the last (decide). A key changed
// again costs its early record, encoded in vain; a partition of few keys,
// each changing many times an interval, encodes none early.
type earlyRecords struct {
	on    bool
	buf   []byte
	force *bool // tests: always (true) or never (false), whatever decide says
	// size is the capacity a new buffer starts with: the last
	// checkpoint's record bytes with a quarter to spare.
	size int
}

// encode appends ks's changelog record to the buffer and returns where it
// is; end −1 when it could not be encoded (the checkpoint encodes it
// again, and fails with the reason).
func (e *earlyRecords) encode(m *keyed.Model, ks *keyed.State) (at, end int32) {
	if e.buf == nil {
		e.buf = make([]byte, 0, e.size)
	}
	n := len(e.buf)
	b, err := m.AppendChangelog(e.buf, ks)
	if err != nil || len(b) > 1<<31-1 {
		return 0, -1
	}
	e.buf = b
	return int32(n), int32(len(b))
}

// take returns the buffer for a checkpoint of keys key records of about
// hint bytes each, with the records encoded early in it, and starts a new
// one: the checkpoint's records keep this one.
func (e *earlyRecords) take(keys, hint int) []byte {
	b := e.buf
	e.buf = nil
	if b == nil {
		b = make([]byte, 0, keys*hint*5/4)
	}
	e.size = keys * hint * 5 / 4
	return b
}

// decide sets whether the next interval's keys are encoded early: when at
// least half of the keys a checkpoint wrote (written) changed once (once).
func (e *earlyRecords) decide(once, written int) {
	e.on = once*2 >= written && written > 0
	if e.force != nil {
		e.on = *e.force
	}
}
