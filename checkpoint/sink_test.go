package checkpoint

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
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

// randomLog is a partition's log as owners, fenced former owners, torn
// writes and misfiled records leave it: claims, key records (some with
// empty states) and markers across epochs, in any order, some corrupted.
func randomLog(r *rand.Rand, p int) []Entry {
	var log []Entry
	epochs := []Epoch{NextEpoch(0, 1), NextEpoch(1<<32, 2), NextEpoch(2<<32, 3)}
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
		applied := func(key string) ([2]int64, bool) {
			rec, ok := sink.keys[key]
			if !ok {
				return [2]int64{}, false
			}
			return rec.AppliedThrough, true
		}
		if !maps.EqualFunc(want.Keys, sink.keys, func(a, b *KeyRecord) bool { return reflect.DeepEqual(a, b) }) ||
			fmt.Sprint(want.Corrupt) != fmt.Sprint(got.Corrupt) || fmt.Sprint(want.Ignored) != fmt.Sprint(got.Ignored) ||
			!reflect.DeepEqual(want.Marker, got.Marker) || !reflect.DeepEqual(want.Owner, got.Owner) ||
			want.MaxEpoch != got.MaxEpoch || want.Fenced != got.Fenced || want.ReplayFrom() != got.ReplayFromKeys(applied) {
			differing++
			if differing <= 3 {
				t.Errorf("%s log %d differs:\nkeys %v\nsink %v\ncorrupt %v / %v\nreplay %v / %v", "memory", i,
					want.Keys, sink.keys, want.Corrupt, got.Corrupt, want.ReplayFrom(), got.ReplayFromKeys(applied))
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
