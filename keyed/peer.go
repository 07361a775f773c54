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
// 45): a partition's worker also reads the other partitions of the events
// topic, merged with its own records by record timestamp, and hands their
// records to Peer. The shared part learns each labeled event of them at its
// own margin — the replicated form of docs/LEARNING.md, whose keys' margins
// were measured to change the fourth decimal — and the keys learn only
// their own partition's records. Every partition's shared part thus learns
// every label of the topic in one order, a function of the logs. The other
// partitions' late labels (labels topic, or label records) are not read: a
// labeled event teaches, an unlabeled one only moves the position.
//
// The shared part's state keeps, per other partition, the last offset it
// absorbed (checkpointed with it: key-state version 7), so that a replay
// skips what it learned before its checkpoint, as keys skip their own
// records by Applied.

// peerOffsets is the last events-topic offset absorbed per other partition,
// indexed by partition, checkpoint.NoOffset for none.
type peerOffsets struct{ through []int64 }

// at is the last offset absorbed of partition p, NoOffset for none.
func (o *peerOffsets) at(p int) int64 {
	if o == nil || p >= len(o.through) {
		return checkpoint.NoOffset
	}
	return o.through[p]
}

// set records offset as the last absorbed of partition p.
func (o *peerOffsets) set(p int, offset int64) {
	for len(o.through) <= p {
		o.through = append(o.through, checkpoint.NoOffset)
	}
	o.through[p] = offset
}

// PeerApplied is the last offset of partition p's events topic that the
// shared part ps absorbed, checkpoint.NoOffset for none.
func (ps *State) PeerApplied(p int) int64 { return ps.peers.at(p) }

// PeerResult is what Peer did with another partition's record.
type PeerResult int

// The results of Peer.
const (
	// PeerSkipped: the shared part absorbed the record before its
	// checkpoint (a replay).
	PeerSkipped PeerResult = iota
	// PeerIgnored: absorbed, nothing to learn (no label, a label record).
	PeerIgnored
	// PeerLearned: the shared part learned the event's label.
	PeerLearned
	// PeerFailed: absorbed, but its input could not be made a vector or
	// learning it would have made the shared part non-finite: the step
	// was not taken (a replay does the same).
	PeerFailed
)

// Peer hands the shared part a record of another partition of the events
// topic (in.Partition), decoded and range-checked by the holder: the shared
// part learns a labeled event at its own margin and records the offset. It
// fails only when the settings do not share across partitions or the
// shared part's holder fails (a key store); a record it cannot learn from
// is PeerFailed.
func (m *Model) Peer(in Input) (PeerResult, error) {
	if !m.s.SharedAcrossPartitions {
		return PeerSkipped, fmt.Errorf("a record of partition %d handed to a model that does not share across partitions", in.Partition)
	}
	if in.Topic != EventsTopic {
		return PeerSkipped, fmt.Errorf("another partition's record of input topic %d: only the events topic is shared", in.Topic)
	}
	ps, err := m.shared.Population()
	if err != nil {
		return PeerSkipped, err
	}
	if in.Offset <= ps.peers.at(in.Partition) {
		return PeerSkipped, nil
	}
	if ps.peers == nil {
		ps.peers = &peerOffsets{}
	}
	ps.peers.set(in.Partition, in.Offset)
	m.shared.PopulationChanged(ps)
	ev := in.Event
	if ev.Kind != topics.Input || ev.Label == 0 {
		return PeerIgnored, nil
	}
	x, err := m.s.Vector.Vector(*ev)
	var p learners.Prediction
	if err == nil {
		p, err = ps.learner.Predict(x)
	}
	if err == nil {
		err = m.learnSum(ps, x, ev.Label, p.Score)
	}
	if err != nil {
		return PeerFailed, nil
	}
	return PeerLearned, nil
}

// appendTo appends the offsets in key-state version 7's layout: the
// partitions with one, by partition.
func (o *peerOffsets) appendTo(b []byte) []byte {
	n := 0
	for _, t := range o.through {
		if t != checkpoint.NoOffset {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for p, t := range o.through {
		if t != checkpoint.NoOffset {
			b = binary.AppendUvarint(b, uint64(p))
			b = binary.AppendVarint(b, t)
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
		p, t := r.Uvarint(), r.Varint()
		if r.Err != nil || p >= maxPeers || int(p) <= last || t < 0 {
			r.Fail("peer offset")
			return o
		}
		o.set(int(p), t)
		last = int(p)
	}
	return o
}
