package keyed

import (
	"bytes"
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
	// awaited counts the ids in pending, so that a new event's duplicate id
	// and a label's event are found without a scan.
	awaited map[string]int32
	early   []early // labels-topic labels waiting for their event, in arrival order
	// held is the bytes of pending and early, bounded by MaxPendingBytes.
	held int
}

// Sizes of pending entries, as counted against MaxPendingBytes.
func (p pending) size() int { return len(p.id) + 48 + int(p.nnz)*12 }

func (e early) size() int { return len(e.id) + 24 }

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
		ks.wait.dropAwaited(n)
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
	if ks.awaiting(ev.ID) {
		i = slices.IndexFunc(ks.wait.pending, func(p pending) bool { return p.id == ev.ID })
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
	ks.wait.unawait(i)
	m.stats.LabelsJoined++
	l := labeled{x: x, label: ev.Label, ts: q.ts, made: q.decided, keyLearns: q.learnable()}
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
	lw.bound(m.s.MaxPendingBytes, m.stats)
}
