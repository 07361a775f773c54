package keyed

import (
	"bytes"
	"errors"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/internal/wire"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

// The shared part's offsets in the other partitions are written with it
// (key-state version 7) and read back; every other state stays version 6;
// a version 7 state whose peers are malformed is refused.
func TestSharedPartKeepsItsPeers(t *testing.T) {
	s := testSettings(t, "logreg", "")
	s.Population, s.SharedAcrossPartitions = PopulationAdditive, true
	m, h := heldModel(t, s, &Totals{})
	for _, in := range []struct {
		p, topic int
		offset   int64
		ev       topics.Event
		want     PeerResult
	}{
		{3, EventsTopic, 0, topics.Event{Kind: topics.Input, ID: "a", X: []float64{1, 0, 0, 0}, Label: 1}, PeerLearned},
		{3, EventsTopic, 0, topics.Event{Kind: topics.Input, ID: "a", X: []float64{1, 0, 0, 0}, Label: 1}, PeerSkipped},
		{1, EventsTopic, 9, topics.Event{Kind: topics.Input, ID: "b", X: []float64{0, 1, 0, 0}}, PeerAwaiting},
		{1, EventsTopic, 10, topics.Event{Kind: topics.Input, ID: "c", X: []float64{0, 0, 1, 0}}, PeerAwaiting},
		{1, EventsTopic, 11, topics.Event{Kind: topics.Input, ID: "d", X: []float64{0, 0, 0, 1}}, PeerAwaiting},
		{3, EventsTopic, 4, topics.Event{Kind: topics.LabelRecord, ID: "b", Label: -1}, PeerIgnored}, // another partition's b
		{1, EventsTopic, 12, topics.Event{Kind: topics.LabelRecord, ID: "b", Label: -1}, PeerLearned},
		{1, EventsTopic, 13, topics.Event{Kind: topics.LabelRecord, ID: "b", Label: -1}, PeerIgnored}, // joined already
		{1, LabelsTopic, 5, topics.Event{Kind: topics.LabelRecord, ID: "d", Label: 1}, PeerLearned},   // on the labels topic
		{1, LabelsTopic, 5, topics.Event{Kind: topics.LabelRecord, ID: "d", Label: 1}, PeerSkipped},
		{1, LabelsTopic, 6, topics.Event{Kind: topics.Input, ID: "e", X: []float64{1, 0, 0, 0}, Label: 1}, PeerFailed}, // not a label record
	} {
		got, err := m.Peer(Input{Key: "x", Topic: in.topic, Partition: in.p, Offset: in.offset, Event: &in.ev})
		if err != nil || got != in.want {
			t.Fatalf("partition %d offset %d: %v %v, want %v", in.p, in.offset, got, err, in.want)
		}
	}
	ps := h.ps
	b, err := ps.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if b[1] != stateVersion || !hasPeers(int(b[1])) {
		t.Fatalf("written as version %d, want %d (with peers)", b[1], stateVersion)
	}
	back, err := m.Decode(&checkpoint.KeyRecord{Key: PopulationKey, State: b})
	if err != nil {
		t.Fatal(err)
	}
	none := [2]int64{checkpoint.NoOffset, checkpoint.NoOffset}
	for p, want := range [][2]int64{none, {13, 6}, none, {4, checkpoint.NoOffset}, none} {
		if got := [2]int64{back.PeerApplied(p, EventsTopic), back.PeerApplied(p, LabelsTopic)}; got != want {
			t.Errorf("partition %d: %v absorbed, want %v", p, got, want)
		}
	}
	if again, _ := back.MarshalBinary(); !bytes.Equal(again, b) {
		t.Error("the state read back writes other bytes")
	}
	// The awaited event c came back with its input: its label joins.
	h.ps = back
	lr := topics.Event{Kind: topics.LabelRecord, ID: "c", Label: 1}
	if got, err := m.Peer(Input{Key: "x", Topic: EventsTopic, Partition: 1, Offset: 14, Event: &lr}); got != PeerLearned || err != nil {
		t.Fatalf("c's label after the round trip: %v %v", got, err)
	}
	h.ps = ps
	ks, _ := m.NewState("k")
	if kb, _ := ks.MarshalBinary(); kb[1] != peerlessVersion || hasPeers(int(kb[1])) {
		t.Errorf("a key's state written as version %d, want %d (no peers)", kb[1], peerlessVersion)
	}
	// The peers section is the last: each fault alone in it is refused,
	// and the same section without the fault reads.
	tail := len(b) - len(ps.peers.appendTo(nil))
	x, _ := learners.NewDense([]float64{1, 0, 0, 0})
	xb, _ := x.AppendBinary(nil)
	awaited := func(p byte) []byte { // partition 2 read through offset 1 on both topics, then one awaited event of p
		return wire.AppendBytes(append([]byte{}, 1, 2, 2, 2, 1, p, 2, 1, 'x', 1, 'y'), xb)
	}
	for _, tc := range []struct {
		name  string
		peers []byte
		ok    bool
	}{
		{"valid", []byte{1, 2, 2, 2, 0}, true},
		{"valid, with an awaited event", awaited(2), true},
		{"unordered", []byte{2, 3, 2, 2, 1, 2, 2, 0}, false},
		{"below -1", []byte{1, 2, 3, 2, 0}, false},
		{"no offset", []byte{1, 2, 1, 1, 0}, false},
		{"an awaited event of a partition not read", awaited(5), false},
		{"cut", []byte{2, 1}, false},
	} {
		bad := append(append([]byte{}, b[:tail]...), tc.peers...)
		_, err := m.Decode(&checkpoint.KeyRecord{Key: PopulationKey, State: bad})
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, errState) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if _, err := m.Peer(Input{Topic: 2, Partition: 1, Event: &topics.Event{}}); err == nil {
		t.Error("a record of an unknown input topic was taken")
	}
}

// The other partitions' awaited events are bounded as a key's are: the
// oldest is given up beyond Settings.MaxPending events or
// Settings.MaxPendingBytes of them, and an event whose
// partition moved more than Settings.PendingTTL records past it expires;
// each is counted once, and its label then teaches nothing.
func TestPeerAwaitedEventsAreBounded(t *testing.T) {
	s := testSettings(t, "logreg", "")
	s.Population, s.SharedAcrossPartitions, s.MaxPending, s.PendingTTL = PopulationAdditive, true, 3, 10
	tot := &Totals{}
	m, h := heldModel(t, s, tot)
	peer := func(p int, offset int64, ev topics.Event) PeerResult {
		t.Helper()
		got, err := m.Peer(Input{Key: "x", Topic: EventsTopic, Partition: p, Offset: offset, Event: &ev})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	in := func(id string) topics.Event {
		return topics.Event{Kind: topics.Input, ID: id, X: []float64{1, 0, 0, 0}}
	}
	label := func(id string) topics.Event { return topics.Event{Kind: topics.LabelRecord, ID: id, Label: 1} }
	for i, id := range []string{"a", "b", "c", "d"} { // a is given up for d
		peer(1, int64(i), in(id))
	}
	if tot.PeerExpired != 1 || peer(1, 4, label("a")) != PeerIgnored || peer(1, 5, label("b")) != PeerLearned {
		t.Fatalf("over the bound: %d expired", tot.PeerExpired)
	}
	peer(2, 0, in("e"))
	peer(1, 20, label("z")) // c and d are over 10 records behind partition 1: past the TTL
	if tot.PeerExpired != 3 || peer(1, 21, label("c")) != PeerIgnored || peer(2, 5, label("e")) != PeerLearned {
		t.Fatalf("past the TTL: %d expired", tot.PeerExpired)
	}
	// The bytes bound, as a key's: with room for two events' bytes, a third
	// gives up the oldest, so that the shared part's record stays within
	// what a key's may hold.
	x, err := m.s.Vector.Vector(in("f"))
	if err != nil {
		t.Fatal(err)
	}
	one := peerAwait{key: "x", pending: pending{id: "f"}}
	one.keep(x)
	m.s.MaxPending, m.s.MaxPendingBytes = 100, 2*one.size()
	for i, id := range []string{"f", "g", "h"} { // f is given up for h
		peer(3, int64(i), in(id))
	}
	if tot.PeerExpired != 4 || h.ps.PeerAwaiting() != 2 || peer(3, 3, label("f")) != PeerIgnored || peer(3, 4, label("g")) != PeerLearned {
		t.Fatalf("over the bytes bound: %d expired, %d awaited", tot.PeerExpired, h.ps.PeerAwaiting())
	}
}
