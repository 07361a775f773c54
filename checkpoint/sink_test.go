package checkpoint

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// mapSink is a KeySink over a map, as a restoring worker's key map is.
type mapSink struct {
	keys     map[string]*KeyRecord
	reserved int
}

func (m *mapSink) Reserve(n int) {
	m.reserved = n
	if m.keys == nil {
		m.keys = make(map[string]*KeyRecord, n)
	}
}
func (m *mapSink) Put(rec *KeyRecord) { m.keys[rec.Key] = rec }
func (m *mapSink) Has(key string) bool {
	_, ok := m.keys[key]
	return ok
}

// applied is the AppliedThrough of the key's record, for ReplayFromKeys.
func (m *mapSink) applied(key string) ([2]int64, bool) {
	rec, ok := m.keys[key]
	if !ok {
		return [2]int64{}, false
	}
	return rec.AppliedThrough, true
}

// randomLog is a partition's log as owners, fenced former owners, torn
// writes and misfiled records leave it: claims, key records (some with
// empty states) and markers across epochs, in any order, some corrupted.
func randomLog(r *rand.Rand, p int) []Entry {
	return randomLogOf(r, p, []Epoch{NextEpoch(0, 1), NextEpoch(1<<32, 2), NextEpoch(2<<32, 3)})
}

// randomLogOf is randomLog with records of the given epochs.
func randomLogOf(r *rand.Rand, p int, epochs []Epoch) []Entry {
	var log []Entry
	keys := []string{"a", "b", "c", "d"}
	for range 5 + r.IntN(30) {
		e := epochs[r.IntN(len(epochs))]
		part := p
		if r.IntN(20) == 0 {
			part = p + 1 // misfiled
		}
		var ent Entry
		switch k := r.IntN(10); {
		case k == 0:
			ent = Entry{ownerKey(e), EncodeOwnership(Ownership{Partition: part, Epoch: e, Owner: "m"})}
		case k == 1:
			ent = Entry{markerKey(e), EncodeMarker(Marker{Partition: part, Epoch: e, Through: [2]int64{int64(r.IntN(100)), NoOffset}})}
		default:
			key := keys[r.IntN(len(keys))]
			var state []byte
			if r.IntN(6) != 0 {
				state = fmt.Appendf(nil, "%s@%d", key, len(log))
			}
			ent = Entry{key, EncodeKey(KeyRecord{Partition: part, Key: key, Epoch: e, AppliedThrough: [2]int64{int64(r.IntN(100)), NoOffset}, State: state})}
		}
		if r.IntN(12) == 0 { // a flipped byte: the CRC no longer matches
			ent.Value[len(ent.Value)-1] ^= 0xff
		}
		log = append(log, ent)
	}
	return log
}

// Loading into a KeySink gives what loading into Snapshot.Keys gives (the
// stores share absorb), for logs with fenced, corrupt, empty and misfiled records:
// the same record per key, the same problems, epochs and replay start.
func TestLoadIntoSinkMatchesSnapshotKeys(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 11))
	const logs = 2000
	differing, fenced, corrupt := 0, 0, 0
	for i := range logs {
		s := NewMemoryStore()
		log := randomLog(r, 3)
		s.SetLog(3, log)
		want, err := s.Load(ctx, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		sink := &mapSink{}
		got, err := s.Load(ctx, 3, sink)
		if err != nil {
			t.Fatal(err)
		}
		if got.Keys != nil {
			t.Fatalf("%s log %d: Snapshot.Keys set beside a sink", "memory", i)
		}
		if sink.reserved != len(log) {
			t.Fatalf("%s log %d: reserved %d for a log of %d", "memory", i, sink.reserved, len(log))
		}
		if !maps.EqualFunc(want.Keys, sink.keys, func(a, b *KeyRecord) bool { return reflect.DeepEqual(a, b) }) ||
			fmt.Sprint(want.Corrupt) != fmt.Sprint(got.Corrupt) || fmt.Sprint(want.Ignored) != fmt.Sprint(got.Ignored) ||
			!reflect.DeepEqual(want.Marker, got.Marker) || !reflect.DeepEqual(want.Owner, got.Owner) ||
			want.MaxEpoch != got.MaxEpoch || want.Fenced != got.Fenced || want.ReplayFrom() != got.ReplayFromKeys(sink.applied) {
			differing++
			if differing <= 3 {
				t.Errorf("%s log %d differs:\nkeys %v\nsink %v\ncorrupt %v / %v\nreplay %v / %v", "memory", i,
					want.Keys, sink.keys, want.Corrupt, got.Corrupt, want.ReplayFrom(), got.ReplayFromKeys(sink.applied))
			}
		}
		if want.Fenced > 0 {
			fenced++
		}
		if len(want.Corrupt) > 0 {
			corrupt++
		}
	}
	if differing != 0 {
		t.Fatalf("%d of %d logs load differently into a sink", differing, logs)
	}
	if fenced < logs/10 || corrupt < logs/10 { // the logs must exercise the rules
		t.Fatalf("only %d logs with fenced records and %d with corrupt ones", fenced, corrupt)
	}
}

// A snapshot resumed at the end of an owner's clean checkpoint, with the
// records after it absorbed by LoadRange, is what a full Load of the whole
// log gives, whatever other owners, zombies and corruption wrote after it:
// the same record per key, marker, owner, epochs and replay start, and the
// tail's own fenced and ignored records.
func TestResumedSnapshotMatchesAFullLoad(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 5))
	const logs = 2000
	differing, fencedTails, corruptTails, newerOwners := 0, 0, 0, 0
	for i := range logs {
		const p = 2
		s := NewMemoryStore()
		s.SetLog(p, randomLog(r, p))
		before, err := s.Load(ctx, p, nil)
		must(t, err)
		// The owner that keeps its state: it claims, rewrites every key it
		// restored (as a restore's dirty keys are) and checkpoints.
		ours := NextEpoch(before.MaxEpoch, 9)
		owner := Ownership{Partition: p, Epoch: ours, Owner: "us"}
		must(t, s.Claim(ctx, owner))
		var recs []KeyRecord
		for _, k := range slices.Sorted(maps.Keys(before.Keys)) {
			rec := *before.Keys[k]
			rec.Epoch = ours
			recs = append(recs, rec)
		}
		for _, c := range before.Corrupt { // a key with no usable record is written as holding nothing
			if _, ok := before.Keys[c.Key]; !ok {
				recs = append(recs, KeyRecord{Partition: p, Key: c.Key, Epoch: ours, AppliedThrough: [2]int64{NoOffset, NoOffset}})
			}
		}
		m := Marker{Partition: p, Epoch: ours, Through: [2]int64{int64(100 + i), NoOffset}}
		end, err := s.WriteAt(ctx, recs, m)
		must(t, err)
		held, err := s.Load(ctx, p, nil)
		must(t, err)
		if len(held.Corrupt) != 0 {
			t.Fatalf("log %d: the owner's checkpoint left %v", i, held.Corrupt)
		}
		// Others write after it: older epochs (zombies), its own, newer ones.
		tail := randomLogOf(r, p, []Epoch{NextEpoch(0, 1), ours, NextEpoch(ours, 3), NextEpoch(NextEpoch(ours, 3), 1)})
		log := s.Log(p)
		s.SetLog(p, append(log, tail...))
		want, err := s.Load(ctx, p, nil)
		must(t, err)

		sink := &mapSink{keys: maps.Clone(held.Keys)}
		got, err := Resume(sink, owner, m)
		must(t, err)
		must(t, s.LoadRange(ctx, p, end, end+int64(len(tail)), got))
		if !maps.EqualFunc(want.Keys, sink.keys, func(a, b *KeyRecord) bool { return reflect.DeepEqual(a, b) }) ||
			fmt.Sprint(want.Corrupt) != fmt.Sprint(got.Corrupt) || fmt.Sprint(want.Ignored[len(held.Ignored):]) != fmt.Sprint(got.Ignored) ||
			!reflect.DeepEqual(want.Marker, got.Marker) || want.Owner.Epoch != got.Owner.Epoch ||
			want.MaxEpoch != got.MaxEpoch || want.Fenced-held.Fenced != got.Fenced || want.ReplayFrom() != got.ReplayFromKeys(sink.applied) {
			differing++
			if differing <= 3 {
				t.Errorf("log %d differs:\nkeys %v\nsink %v\ncorrupt %v / %v\nmarker %+v / %+v\nreplay %v / %v", i,
					want.Keys, sink.keys, want.Corrupt, got.Corrupt, want.Marker, got.Marker, want.ReplayFrom(), got.ReplayFromKeys(sink.applied))
			}
		}
		if got.Fenced > 0 {
			fencedTails++
		}
		if len(got.Corrupt) > 0 {
			corruptTails++
		}
		if got.MaxEpoch > ours {
			newerOwners++
		}
	}
	if differing != 0 {
		t.Fatalf("%d of %d resumed snapshots differ from a full load", differing, logs)
	}
	if fencedTails < logs/10 || corruptTails < logs/10 || newerOwners < logs/10 { // the tails must exercise the rules
		t.Fatalf("only %d tails with fenced records, %d with corrupt ones, %d with a newer owner", fencedTails, corruptTails, newerOwners)
	}
}

// LoadRange refuses what is not a resumed snapshot over a range of the
// log, and Resume what cannot be one.
func TestLoadRangeRefusesBadCalls(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	must(t, s.Claim(ctx, Ownership{Partition: 0, Epoch: 1}))
	snap, err := Resume(&mapSink{keys: map[string]*KeyRecord{}}, Ownership{Partition: 0, Epoch: 1}, Marker{Partition: 0, Epoch: 1})
	must(t, err)
	loaded, _ := s.Load(ctx, 0, nil)
	for _, c := range []struct {
		name     string
		from, to int64
		snap     *Snapshot
	}{
		{"a loaded snapshot", 0, 1, &loaded},
		{"no snapshot", 0, 1, nil},
		{"backwards", 1, 0, snap},
		{"negative", -1, 1, snap},
		{"past the end", 0, 2, snap},
	} {
		if err := s.LoadRange(ctx, 0, c.from, c.to, c.snap); err == nil {
			t.Errorf("%s: LoadRange [%d, %d) accepted", c.name, c.from, c.to)
		}
	}
	if _, err := Resume(nil, Ownership{}, Marker{}); err == nil {
		t.Error("Resume without a sink accepted")
	}
	if _, err := Resume(&mapSink{}, Ownership{Partition: 0, Epoch: 1}, Marker{Partition: 0, Epoch: 2}); err == nil {
		t.Error("Resume with a marker newer than its owner accepted")
	}
}
