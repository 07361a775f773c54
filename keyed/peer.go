package keyed

import (
	"encoding/binary"
	"fmt"

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
// labels topic), within the keys' bounds (Settings.MaxPending awaited
// events across the other partitions, oldest given up first, and
// Settings.PendingTTL events-topic records of its partition). A label
// that comes before its event teaches nothing (the keys keep theirs).
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
}

// peerAwait is another partition's event awaiting its label.
type peerAwait struct {
	partition int
	offset    int64
	key, id   string
	x         learners.Vector // the input, encoded only by a checkpoint
	done      bool            // joined or given up
}

// joinKey names an event of partition p and key by its id.
func joinKey(p int, key, id string) string {
	return string(binary.AppendUvarint(nil, uint64(p))) + key + "\x00" + id
}

// await keeps e until its label comes, giving up the oldest beyond max
// (counted in expired).
func (o *peerOffsets) await(e peerAwait, max int) (expired int) {
	if o.index == nil {
		o.index = map[string]uint64{}
	}
	k := joinKey(e.partition, e.key, e.id)
	if _, dup := o.index[k]; dup {
		return 0 // its own partition refuses it as a duplicate id
	}
	for len(o.index) >= max && len(o.index) > 0 {
		o.drop(&o.wait[o.live()])
		expired++
	}
	o.index[k] = o.first + uint64(len(o.wait))
	o.wait = append(o.wait, e)
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
	e.done = true
	e.x = learners.Vector{}
	delete(o.index, joinKey(e.partition, e.key, e.id))
}

// trim passes the done events at the front, moving the rest down once
// more than half of the slice is behind them.
func (o *peerOffsets) trim() {
	for o.head < len(o.wait) && o.wait[o.head].done {
		o.wait[o.head] = peerAwait{}
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
func (o *peerOffsets) join(p int, key, id string) (learners.Vector, bool) {
	seq, ok := o.index[joinKey(p, key, id)]
	if !ok {
		return learners.Vector{}, false
	}
	e := &o.wait[seq-o.first]
	x := e.x
	o.drop(e)
	o.trim()
	return x, true
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
		if x, ok = o.join(in.Partition, in.Key, ev.ID); !ok {
			return PeerIgnored, nil
		}
	case label == 0:
		x, err := m.s.Vector.Vector(*ev)
		if err != nil {
			return PeerFailed, nil
		}
		m.stats.PeerExpired += int64(o.await(peerAwait{partition: in.Partition, offset: in.Offset, key: in.Key, id: ev.ID, x: x}, m.s.MaxPending))
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

// appendTo appends the offsets in key-state version 7's layout: the
// partitions with one, by partition; then the awaited events, oldest first.
func (o *peerOffsets) appendTo(b []byte) []byte {
	none := [2]int64{checkpoint.NoOffset, checkpoint.NoOffset}
	n := 0
	for _, t := range o.through {
		if t != none {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for p, t := range o.through {
		if t != none {
			b = binary.AppendUvarint(b, uint64(p))
			b = binary.AppendVarint(b, t[EventsTopic])
			b = binary.AppendVarint(b, t[LabelsTopic])
		}
	}
	b = binary.AppendUvarint(b, uint64(len(o.index)))
	var xb []byte
	for i := o.head; i < len(o.wait); i++ {
		if e := &o.wait[i]; !e.done {
			b = binary.AppendUvarint(b, uint64(e.partition))
			b = binary.AppendVarint(b, e.offset)
			b = wire.AppendString(b, e.key)
			b = wire.AppendString(b, e.id)
			xb, _ = e.x.AppendBinary(xb[:0]) // a vector made by the model: it encodes
			b = wire.AppendBytes(b, xb)
		}
	}
	return b
}

// maxPeers bounds the partitions a decoded state names (a corrupt count
// must not allocate without bound): Kafka's own limits are far below it.
const maxPeers = 1 << 16

// decodePeers reads what appendTo wrote.
func decodePeers(r *wire.Reader) *peerOffsets {
	o := &peerOffsets{}
	n := r.Uvarint()
	if n > maxPeers {
		r.Fail("peer count")
		return o
	}
	last := -1
	for range n {
		p, ev, lb := r.Uvarint(), r.Varint(), r.Varint()
		if r.Err != nil || p >= maxPeers || int(p) <= last || ev < checkpoint.NoOffset || lb < checkpoint.NoOffset || ev == lb && ev == checkpoint.NoOffset {
			r.Fail("peer offset")
			return o
		}
		o.set(int(p), EventsTopic, ev)
		o.set(int(p), LabelsTopic, lb)
		last = int(p)
	}
	n = r.Uvarint()
	if n > maxPeerWait {
		r.Fail("awaited events of other partitions")
		return o
	}
	for range n {
		e := peerAwait{partition: int(r.Uvarint()), offset: r.Varint(), key: string(r.View()), id: string(r.View())}
		xb := r.View()
		if r.Err != nil || e.partition >= maxPeers || e.offset < 0 {
			r.Fail("an awaited event of another partition")
			return o
		}
		if err := e.x.UnmarshalBinary(xb); err != nil {
			r.Fail("an awaited event's input of another partition")
			return o
		}
		o.await(e, maxPeerWait)
	}
	return o
}

// maxPeerWait bounds the awaited events a decoded state holds.
const maxPeerWait = 1 << 24
