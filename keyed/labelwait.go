package keyed

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/driftstream/driftstream/internal/wire"
	"github.com/driftstream/driftstream/learners"
)

// pending is a label query waiting for its label. It keeps the prediction
// decided for the event, so that the label, when it comes, scores that
// prediction (a delayed label counts as labeled, and as a mistake when the
// decided label was wrong) before it is learned.
type pending struct {
	id     string
	offset int64
	// x is the event's input, until the key's first checkpoint after the
	// event: then its encoding (sized, as the key state holds it) replaces
	// it in xb, so that the key's later checkpoints copy the bytes rather
	// than encode the input again (an event whose label is late or never
	// comes is written at every checkpoint of its key while it waits);
	// input() reads it back when the label comes. hasX and nnz outlive x.
	x    learners.Vector
	xb   []byte
	hasX bool
	nnz  int32
	// sourced is set when the input is the event's as decoded, which the
	// events topic gives back (sourced.go): the changelog's record of the
	// key leaves it out. missing is set while such an input is not held (a
	// key restored from its changelog record, until the replay revisits
	// the event).
	sourced, missing bool
	// decided is the label predicted for the event, 0 when unknown (a key
	// state written before predictions were kept).
	decided int
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
func (p pending) learnable() bool { return p.hasX && !p.populationOnly }

// keep sets the event's input, kept until its label comes.
func (p *pending) keep(x learners.Vector) {
	p.x, p.hasX, p.nnz = x, x.Dim() > 0, int32(x.NNZ())
}

// appendInput appends the input's sized encoding to b, as the key state
// holds it (wire.AppendSized of Vector.AppendBinary). The first call keeps
// a copy of those bytes and drops x; later calls copy them.
func (p *pending) appendInput(b []byte) []byte {
	if p.xb != nil {
		return append(b, p.xb...)
	}
	start := len(b)
	b, _ = wire.AppendSized(b, p.x.AppendBinary) // a Vector's encoding cannot fail
	p.xb, p.x = bytes.Clone(b[start:]), learners.Vector{}
	return b
}

// appendHeld appends the input as the key store holds it: its sized
// encoding, or, for a sourced input not held (missing) or left out of a
// changelog record (omit), an empty encoding and the input's count of
// stored values.
func (p *pending) appendHeld(b []byte, omit bool) []byte {
	if p.sourced && (omit || p.missing) {
		b = append(b, 0)
		return binary.AppendUvarint(b, uint64(p.nnz))
	}
	return p.appendInput(b)
}

// input is the event's input: x, or what xb encodes.
func (p *pending) input() (learners.Vector, error) {
	if p.xb == nil || !p.hasX {
		return p.x, nil
	}
	var x learners.Vector
	r := wire.NewReader(p.xb, errState)
	err := x.UnmarshalBinary(r.View())
	if err == nil {
		err = r.Done()
	}
	return x, err
}

// early is a label from the labels topic that arrived before its event: the
// two topics are read concurrently, so their interleaving is arbitrary.
type early struct {
	id     string
	label  int
	offset int64 // labels-topic offset, for the TTL
}

// labelWait is what a key holds between an event and its label.
type labelWait struct {
	pending []pending // in offset order; add and drop through await, dropAwaited, unawait
	// awaited holds the ids in pending, so that a new event's duplicate id
	// and a label's event are found without a scan.
	awaited map[string]awaitedID
	early   []early // labels-topic labels waiting for their event, in arrival order
	// held is the bytes of pending and early, bounded by MaxPendingBytes.
	held int
	// cache is the changelog encoding of pending's oldest events, from the
	// key's last checkpoint (awaitedcache.go).
	cache awaitedCache
}

// awaitedID is where an awaited id is: the offset of its event, when n,
// the events awaiting with that id, is 1 (a duplicate id is refused, but a
// state an older build wrote may hold one).
type awaitedID struct {
	offset int64
	n      int32
}

// find is the index in pending of the event awaiting with id, −1 when
// none does.
func (lw *labelWait) find(id string) int {
	a, ok := lw.awaited[id]
	if !ok {
		return -1
	}
	if a.n == 1 {
		if i, ok := lw.at(a.offset); ok && lw.pending[i].id == id {
			return i
		}
	}
	return slices.IndexFunc(lw.pending, func(p pending) bool { return p.id == id })
}

// at is the index in pending of the event at offset, if it awaits.
func (lw *labelWait) at(offset int64) (int, bool) {
	return slices.BinarySearchFunc(lw.pending, offset, func(p pending, o int64) int { return cmp.Compare(p.offset, o) }) // in offset order
}

// Sizes of pending entries, as counted against MaxPendingBytes.
func (p pending) size() int { return len(p.id) + 48 + int(p.nnz)*12 }

func (e early) size() int { return len(e.id) + 24 }

// await adds q to the key's events awaiting their label, the oldest dropped
// past max entries (their offsets taken out of sourced, the partition's
// offsets of sourced inputs, unless nil); it returns how many it dropped.
func (lw *labelWait) await(q pending, max int, sourced *offsetSet) int64 {
	lw.pending = append(lw.pending, q)
	lw.held += q.size()
	a := lw.awaited[q.id]
	a.n++
	a.offset = q.offset
	lw.awaited[q.id] = a
	if len(lw.pending) > max {
		lw.dropAwaited(1, sourced)
		return 1
	}
	return 0
}

// dropAwaited drops the n oldest awaited events, and their offsets from
// sourced.
func (lw *labelWait) dropAwaited(n int, sourced *offsetSet) {
	for _, p := range lw.pending[:n] {
		lw.held -= p.size()
		lw.forget(p.id)
		p.untrack(sourced)
	}
	lw.pending = lw.pending[n:]
	lw.cache.dropFront(n)
}

// unawait removes awaited event i (its label came), and its offset from
// sourced.
func (lw *labelWait) unawait(i int, sourced *offsetSet) {
	lw.held -= lw.pending[i].size()
	lw.forget(lw.pending[i].id)
	lw.pending[i].untrack(sourced)
	lw.pending = slices.Delete(lw.pending, i, i+1)
	lw.cache.drop(i)
}

// untrack takes a sourced input's offset out of sourced: the event no
// longer awaits its label.
func (p *pending) untrack(sourced *offsetSet) {
	if p.sourced && sourced != nil {
		sourced.remove(p.offset)
	}
}

func (lw *labelWait) forget(id string) {
	if a := lw.awaited[id]; a.n > 1 {
		a.n--
		lw.awaited[id] = a
	} else {
		delete(lw.awaited, id)
	}
}

// bound drops the oldest pending queries (their offsets from sourced),
// then the oldest early labels, until the key holds at most max bytes of
// them.
func (lw *labelWait) bound(max int, stats *Totals, sourced *offsetSet) {
	for lw.held > max && len(lw.pending) > 0 {
		lw.dropAwaited(1, sourced)
		stats.LabelsExpired++
	}
	for lw.held > max && len(lw.early) > 0 {
		lw.held -= lw.early[0].size()
		lw.early = lw.early[1:]
		stats.LabelsUnknown++
	}
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
func (m *Model) expire(in Input, ks *State) {
	pend, n := ks.pending(), 0
	for n < len(pend) && in.Offset-pend[n].offset > m.s.PendingTTL {
		n++
	}
	if n > 0 {
		ks.wait.dropAwaited(n, &m.sourced)
		m.stats.LabelsExpired += int64(n)
	}
}

// label joins a label record to its awaited event, scores the prediction
// made for it, and learns: a delayed label. A label ahead of its event (on
// the labels topic) waits for it; one whose event the key no longer
// awaits is counted, never retried.
func (m *Model) label(in Input, ks *State) error {
	ev := in.Event
	m.expire(in, ks)
	i := -1
	if ks.wait != nil {
		i = ks.wait.find(ev.ID)
	}
	if i < 0 && in.Topic == LabelsTopic {
		m.early(in, ks)
		return nil
	}
	if i < 0 {
		m.stats.LabelsUnknown++ // unknown or expired id: counted, never retried
		return nil
	}
	q := ks.wait.pending[i]
	x, err := q.input()
	if err != nil { // bytes this process encoded: memory gone bad
		return fmt.Errorf("the input of awaited event %q: %w", q.id, err)
	}
	ks.wait.unawait(i, &m.sourced)
	m.stats.LabelsJoined++
	keyLearns := q.learnable()
	if q.missing { // not re-read after a restore: the label scores, and teaches nothing
		m.stats.InputsLost++
		keyLearns = false
	}
	l := labeled{x: x, label: ev.Label, ts: q.ts, made: q.decided, keyLearns: keyLearns}
	if q.population != 0 {
		l.own, l.population = int(q.own), int(q.population)
	}
	return m.resolve(in, ks, &l)
}

// early keeps a labels-topic label whose event has not come (the two
// topics are read concurrently): bounded, TTL'd.
func (m *Model) early(in Input, ks *State) {
	lw, n := ks.waiting(), 0
	for n < len(lw.early) && in.Offset-lw.early[n].offset > m.s.PendingTTL {
		n++
	}
	m.stats.LabelsUnknown += int64(n)
	for _, e := range lw.early[:n] {
		lw.held -= e.size()
	}
	var dropped int64
	lw.early, dropped = push(lw.early[n:], early{id: in.Event.ID, label: in.Event.Label, offset: in.Offset}, m.s.MaxPending, &lw.held)
	m.stats.LabelsUnknown += dropped
	lw.bound(m.s.MaxPendingBytes, m.stats, &m.sourced)
}
