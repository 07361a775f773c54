package keyed

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/internal/wire"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

// A shared part across partitions (Settings.SharedAcrossPartitions, issue
// 45): a partition's worker also reads the other partitions of the input
// topics, merged with its own records by record timestamp, and hands their
// records to Peer. The shared part learns each labeled event of them at its
// own margin — the replicated form of docs/LEARNING.md, whose keys' margins
// were measured to change the fourth decimal — and the keys learn only
// their own partition's records. Every partition's shared part thus learns
// every label of the topic in one order, a function of the logs. A labeled
// event teaches at once; an unlabeled one waits, its input kept, for a
// label record of its partition, key and id (on the events topic or the
// labels topic), within a key's bounds (Settings.MaxPending awaited events
// and Settings.MaxPendingBytes of them across the other partitions, oldest
// given up first, so that the shared part's record fits where a key's
// does; Settings.PendingTTL events-topic records of its partition). A
// label that comes before its event teaches nothing (the keys keep
// theirs). The awaited events are not a key's labelWait: theirs are in
// one partition's offset order, which the other partitions' interleaved
// offsets are not; each is a key's pending, though, whose input is encoded
// once (labelwait.go).
//
// The shared part's state keeps, per other partition and input topic, the
// last offset it absorbed, and the awaited events (checkpointed with it: key-state
// version 7), so that a replay skips what it learned before its
// checkpoint, as keys skip their own records by Applied.

// peerOffsets is the last offset absorbed per other partition and input
// topic, indexed by partition, checkpoint.NoOffset for none, and the other
// partitions' events awaiting their label.
type peerOffsets struct {
	through [][2]int64
	// wait[head:] holds the awaited events, oldest first; joined ones stay,
	// done, until they reach the front, and the slice is moved down only
	// when most of it is behind head. first is the sequence number of
	// wait[0], index each live event's sequence number by its join key.
	wait  []peerAwait
	head  int
	first uint64
	index map[string]uint64
	held  int // the awaited events' bytes, counted as a key's (size)
}

// peerAwait is another partition's event awaiting its label: a key's
// pending event (id, offset, its input) of partition's key.
type peerAwait struct {
	partition int
	key       string
	pending
	done bool // joined or given up
}

// size is the bytes the event counts against Settings.MaxPendingBytes.
func (e *peerAwait) size() int { return e.pending.size() + len(e.key) }

// joinKey names an event of partition p and key by its id.
func joinKey(p int, key, id string) string {
	return string(binary.AppendUvarint(nil, uint64(p))) + key + "\x00" + id
}

// await keeps e until its label comes, giving up the oldest while more
// than max events or maxBytes of them wait (counted in expired).
func (o *peerOffsets) await(e peerAwait, max, maxBytes int) (expired int) {
	if o.index == nil {
		o.index = map[string]uint64{}
	}
	k := joinKey(e.partition, e.key, e.id)
	if _, dup := o.index[k]; dup {
		return 0 // its own partition refuses it as a duplicate id
	}
	o.index[k] = o.first + uint64(len(o.wait))
	o.wait = append(o.wait, e)
	o.held += e.size()
	for len(o.index) > 0 && (len(o.index) > max || o.held > maxBytes) {
		o.drop(&o.wait[o.live()])
		expired++
	}
	o.trim()
	return expired
}

// live is the index in wait of the oldest event not done (there is one).
func (o *peerOffsets) live() int {
	i := o.head
	for o.wait[i].done {
		i++
	}
	return i
}

// drop marks e done and forgets its join key.
func (o *peerOffsets) drop(e *peerAwait) {
	delete(o.index, joinKey(e.partition, e.key, e.id))
	o.held -= e.size()
	*e = peerAwait{done: true}
}

// trim passes the done events at the front, moving the rest down once
// more than half of the slice is behind them.
func (o *peerOffsets) trim() {
	for o.head < len(o.wait) && o.wait[o.head].done {
		o.head++
	}
	if o.head > 64 && 2*o.head > len(o.wait) {
		n := copy(o.wait, o.wait[o.head:])
		clear(o.wait[n:])
		o.wait = o.wait[:n]
		o.first += uint64(o.head)
		o.head = 0
	}
}

// expire gives up the events, oldest first, whose partition has moved more
// than ttl records past them.
func (o *peerOffsets) expire(ttl int64) (expired int) {
	for o.head < len(o.wait) && o.wait[o.head].offset+ttl < o.at(o.wait[o.head].partition, EventsTopic) {
		o.drop(&o.wait[o.head])
		o.trim()
		expired++
	}
	return expired
}

// join takes the awaited event of partition p, key and id out: its input,
// false when none awaits.
func (o *peerOffsets) join(p int, key, id string) (learners.Vector, bool, error) {
	seq, ok := o.index[joinKey(p, key, id)]
	if !ok {
		return learners.Vector{}, false, nil
	}
	e := &o.wait[seq-o.first]
	x, err := e.input()
	o.drop(e)
	o.trim()
	return x, true, err
}

// at is the last offset absorbed of partition p's input topic, NoOffset
// for none.
func (o *peerOffsets) at(p, topic int) int64 {
	if o == nil || p >= len(o.through) {
		return checkpoint.NoOffset
	}
	return o.through[p][topic]
}

// set records offset as the last absorbed of partition p's input topic.
func (o *peerOffsets) set(p, topic int, offset int64) {
	for len(o.through) <= p {
		o.through = append(o.through, [2]int64{checkpoint.NoOffset, checkpoint.NoOffset})
	}
	o.through[p][topic] = offset
}

// PeerApplied is the last offset of partition p's input topic (EventsTopic,
// LabelsTopic) that the shared part ps absorbed, checkpoint.NoOffset for
// none.
func (ps *State) PeerApplied(p, topic int) int64 { return ps.peers.at(p, topic) }

// PeerAwaiting is the number of the other partitions' events that the
// shared part ps awaits the label of.
func (ps *State) PeerAwaiting() int {
	if ps.peers == nil {
		return 0
	}
	return len(ps.peers.index)
}

// PeerResult is what Peer did with another partition's record.
type PeerResult int

// The results of Peer.
const (
	// PeerSkipped: the shared part absorbed the record before its
	// checkpoint (a replay).
	PeerSkipped PeerResult = iota
	// PeerIgnored: absorbed, nothing to learn (a label record for no
	// awaited event).
	PeerIgnored
	// PeerLearned: the shared part learned the event's label (inline, or
	// a label record joined to its awaited event).
	PeerLearned
	// PeerAwaiting: an unlabeled event, kept until its label record.
	PeerAwaiting
	// PeerFailed: absorbed, but its input could not be made a vector or
	// learning it would have made the shared part non-finite: the step
	// was not taken (a replay does the same).
	PeerFailed
)

// Peer hands the shared part a record of another partition (in.Partition)
// of an input topic, decoded and range-checked by the holder: the shared
// part learns a labeled event at its own margin, or keeps an unlabeled one
// for its label record, and records the offset. It
// fails only when the settings do not share across partitions or the
// shared part's holder fails (a key store); a record it cannot learn from
// is PeerFailed.
func (m *Model) Peer(in Input) (PeerResult, error) {
	if !m.s.SharedAcrossPartitions {
		return PeerSkipped, fmt.Errorf("a record of partition %d handed to a model that does not share across partitions", in.Partition)
	}
	if in.Topic != EventsTopic && in.Topic != LabelsTopic {
		return PeerSkipped, fmt.Errorf("another partition's record of input topic %d", in.Topic)
	}
	ps, err := m.shared.Population()
	if err != nil {
		return PeerSkipped, err
	}
	if in.Offset <= ps.peers.at(in.Partition, in.Topic) {
		return PeerSkipped, nil
	}
	if ps.peers == nil {
		ps.peers = &peerOffsets{}
	}
	o := ps.peers
	o.set(in.Partition, in.Topic, in.Offset)
	m.shared.PopulationChanged(ps)
	m.stats.PeerExpired += int64(o.expire(m.s.PendingTTL))
	ev := in.Event
	var x learners.Vector
	label := ev.Label
	switch {
	case in.Topic == LabelsTopic && ev.Kind != topics.LabelRecord:
		return PeerFailed, nil // its own partition dead-letters it
	case ev.Kind == topics.LabelRecord:
		var ok bool
		if x, ok, err = o.join(in.Partition, in.Key, ev.ID); !ok {
			return PeerIgnored, nil
		}
		if err != nil { // bytes this process encoded: memory gone bad
			return PeerSkipped, fmt.Errorf("the input of another partition's awaited event %q: %w", ev.ID, err)
		}
	case label == 0:
		x, err := m.s.Vector.Vector(*ev)
		if err != nil {
			return PeerFailed, nil
		}
		e := peerAwait{partition: in.Partition, key: in.Key, pending: pending{id: ev.ID, offset: in.Offset}}
		e.keep(x)
		m.stats.PeerExpired += int64(o.await(e, m.s.MaxPending, m.s.MaxPendingBytes))
		return PeerAwaiting, nil
	default:
		if x, err = m.s.Vector.Vector(*ev); err != nil {
			return PeerFailed, nil
		}
	}
	p, err := ps.learner.Predict(x)
	if err == nil {
		err = m.learnSum(ps, x, label, p.Score)
	}
	if err != nil {
		return PeerFailed, nil
	}
	return PeerLearned, nil
}

// appendTo appends the offsets in key-state version 7's layout (the
// marker's: checkpoint.AppendPeers), then the awaited events, oldest
// first, each input encoded once (pending.appendInput).
func (o *peerOffsets) appendTo(b []byte) []byte {
	b = checkpoint.AppendPeers(b, o.through)
	b = binary.AppendUvarint(b, uint64(len(o.index)))
	for i := o.head; i < len(o.wait); i++ {
		if e := &o.wait[i]; !e.done {
			b = binary.AppendUvarint(b, uint64(e.partition))
			b = binary.AppendVarint(b, e.offset)
			b = wire.AppendString(b, e.key)
			b = wire.AppendString(b, e.id)
			b = e.appendInput(b)
		}
	}
	return b
}

// decodePeers reads what appendTo wrote.
func decodePeers(r *wire.Reader) *peerOffsets {
	o := &peerOffsets{through: checkpoint.ReadPeers(r)}
	n := r.Uvarint()
	if n > maxPeerWait {
		r.Fail("awaited events of other partitions")
		return o
	}
	for range n {
		e := peerAwait{partition: int(r.Uvarint())}
		e.offset, e.key, e.id = r.Varint(), string(r.View()), string(r.View())
		var x learners.Vector
		if err := x.UnmarshalBinary(r.View()); r.Err != nil || err != nil || e.partition >= len(o.through) || e.offset < 0 {
			r.Fail("an awaited event of another partition")
			return o
		}
		e.keep(x)
		o.await(e, maxPeerWait, math.MaxInt) // as checkpointed: within the bounds then
	}
	return o
}

// maxPeerWait bounds the awaited events a decoded state holds.
const maxPeerWait = 1 << 24
