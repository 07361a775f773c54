package checkpoint

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// A checkpoint counts only once its marker is in: the key records of a
// torn checkpoint (its writer stopped between them and the marker) are set
// aside, and each of their keys keeps its record of the checkpoint before.
func TestTornCheckpointIsSetAside(t *testing.T) {
	const p = 0
	e1, e2 := NextEpoch(0, 1), NextEpoch(NextEpoch(0, 1), 2)
	claim := func(e Epoch) Entry { return Entry{ownerKey(e), EncodeOwnership(Ownership{Partition: p, Epoch: e})} }
	rec := func(e Epoch, k string, applied int64) Entry {
		return Entry{k, EncodeKey(KeyRecord{Partition: p, Key: k, Epoch: e, AppliedThrough: [2]int64{applied, NoOffset}, State: fmt.Appendf(nil, "%s@%d", k, applied)})}
	}
	mark := func(e Epoch, through int64) Entry { return Entry{markerKey(e), EncodeMarker(marker(p, e, through))} }
	shared := "\x00population" // sorts first, as the pipeline's shared part does
	first := []Entry{claim(e1), rec(e1, shared, 10), rec(e1, "a", 9), rec(e1, "b", 10), mark(e1, 10)}
	cases := []struct {
		name string
		log  []Entry
		// want is each key's state; torn the records set aside, and
		// tornKeys their keys.
		want     map[string]string
		torn     int
		tornKeys []string
		through  int64
	}{
		{"complete", append(slices.Clone(first), rec(e1, shared, 20), rec(e1, "a", 19), mark(e1, 20)),
			map[string]string{shared: shared + "@20", "a": "a@19", "b": "b@10"}, 0, nil, 20},
		{"shared part only", append(slices.Clone(first), rec(e1, shared, 20)),
			map[string]string{shared: shared + "@10", "a": "a@9", "b": "b@10"}, 1, []string{shared}, 10},
		{"shared part and a prefix", append(slices.Clone(first), rec(e1, shared, 20), rec(e1, "a", 19)),
			map[string]string{shared: shared + "@10", "a": "a@9", "b": "b@10"}, 2, []string{shared, "a"}, 10},
		{"a prefix without the shared part", append(slices.Clone(first), rec(e1, "a", 19), rec(e1, "b", 20)),
			map[string]string{shared: shared + "@10", "a": "a@9", "b": "b@10"}, 2, []string{"a", "b"}, 10},
		{"a new key in the torn part holds nothing", append(slices.Clone(first), rec(e1, "a", 19), rec(e1, "c", 20)),
			map[string]string{shared: shared + "@10", "a": "a@9", "b": "b@10", "c": ""}, 2, []string{"c", "a"}, 10},
		{"torn, then the next owner's checkpoint", append(slices.Clone(first), rec(e1, shared, 20), rec(e1, "a", 19),
			claim(e2), rec(e2, shared, 30), rec(e2, "a", 29), mark(e2, 30)),
			map[string]string{shared: shared + "@30", "a": "a@29", "b": "b@10"}, 2, []string{shared, "a"}, 30},
		{"torn, the next owner's claim only", append(slices.Clone(first), rec(e1, shared, 20), claim(e2)),
			map[string]string{shared: shared + "@10", "a": "a@9", "b": "b@10"}, 1, []string{shared}, 10},
		{"its marker fenced: written after the next owner's claim", append(slices.Clone(first), rec(e1, shared, 20), claim(e2), mark(e1, 20)),
			map[string]string{shared: shared + "@10", "a": "a@9", "b": "b@10"}, 1, []string{shared}, 10},
		// The cleaner removed every marker of the epoch but its last: the
		// records before it are all covered by it.
		{"compacted", []Entry{claim(e1), rec(e1, "b", 10), rec(e1, shared, 20), rec(e1, "a", 19), mark(e1, 20)},
			map[string]string{shared: shared + "@20", "a": "a@19", "b": "b@10"}, 0, nil, 20},
		{"compacted, then torn", []Entry{claim(e1), rec(e1, "b", 10), rec(e1, shared, 20), rec(e1, "a", 19), mark(e1, 20), rec(e1, shared, 30)},
			map[string]string{shared: shared + "@20", "a": "a@19", "b": "b@10"}, 1, []string{shared}, 20},
		{"compacted, with no marker at all", []Entry{claim(e1), rec(e1, "b", 10), rec(e1, shared, 20)},
			map[string]string{shared: "", "b": ""}, 2, []string{"b", shared}, NoOffset},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewMemoryStore()
			s.SetLog(p, c.log)
			check := func(how string, got map[string]*KeyRecord, snap Snapshot) {
				t.Helper()
				states := map[string]string{}
				for k, r := range got {
					states[k] = string(r.State)
				}
				if !maps.Equal(states, c.want) {
					t.Errorf("%s: states %q, want %q", how, states, c.want)
				}
				records, keys := 0, []string(nil)
				for _, tc := range snap.Torn {
					records += tc.Records
					keys = append(keys, tc.Keys...)
				}
				if records != c.torn || !slices.Equal(keys, c.tornKeys) {
					t.Errorf("%s: %d records set aside, keys %q; want %d, %q", how, records, keys, c.torn, c.tornKeys)
				}
				through := NoOffset
				if snap.Marker != nil {
					through = snap.Marker.Through[0]
				}
				if through != c.through {
					t.Errorf("%s: restored marker through %d, want %d", how, through, c.through)
				}
			}
			snap, err := s.Load(context.Background(), p, nil)
			must(t, err)
			check("keys", snap.Keys, snap)
			sink := &mapSink{}
			snap, err = s.Load(context.Background(), p, sink)
			must(t, err)
			check("sink", sink.keys, snap)
		})
	}
}

// Owners that each write checkpoints and stop, some in the middle of their
// last one; each next owner rewrites the keys torn checkpoints set aside in
// its first checkpoint, as the pipeline does. Loading the log, plain or
// compacted as Kafka's cleaner compacts it (the latest record of each record
// key, up to the active segment, here the last claim with no torn record
// before it that a complete checkpoint has not rewritten since: torn.go's
// narrow window), gives every key its record as of the last marker, and
// reports exactly the records set aside.
func TestRandomOwnersRestoreTheLastMarker(t *testing.T) {
	const p = 0
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		var log []Entry
		committed := map[string]string{}
		var max Epoch
		var through int64
		carried := map[string]bool{} // keys set aside and not rewritten since
		tornRecords, safe := 0, 0
		for owner := range 2 + r.IntN(5) {
			e := NextEpoch(max, int32(owner))
			max = e
			if len(carried) == 0 {
				safe = len(log)
			}
			log = append(log, Entry{ownerKey(e), EncodeOwnership(Ownership{Partition: p, Epoch: e})})
			tornRecords = 0
			n := 1 + r.IntN(4)
			for c := range n {
				through += 10
				set := map[string]bool{}
				if c == 0 {
					maps.Copy(set, carried)
				}
				for range 1 + r.IntN(5) {
					set[fmt.Sprintf("k%d", r.IntN(12))] = true
				}
				if r.IntN(2) == 0 {
					set["\x00population"] = true
				}
				keys := slices.Sorted(maps.Keys(set))
				var recs []Entry
				for _, k := range keys {
					st := fmt.Sprintf("%s@%d", k, through)
					recs = append(recs, Entry{k, EncodeKey(KeyRecord{Partition: p, Key: k, Epoch: e, AppliedThrough: [2]int64{through, NoOffset}, State: []byte(st)})})
				}
				if c == n-1 && r.IntN(2) == 0 { // killed while writing it
					cut := 1 + r.IntN(len(recs))
					log = append(log, recs[:cut]...)
					tornRecords = cut
					for _, k := range keys[:cut] {
						carried[k] = true
					}
					through -= 10
					break
				}
				log = append(log, recs...)
				log = append(log, Entry{markerKey(e), EncodeMarker(marker(p, e, through))})
				for _, k := range keys {
					committed[k] = fmt.Sprintf("%s@%d", k, through)
					delete(carried, k)
				}
			}
		}
		for _, compacted := range []bool{false, true} {
			l := log
			if compacted {
				l = compactBefore(log, safe)
			}
			s := NewMemoryStore()
			s.SetLog(p, l)
			snap, err := s.Load(context.Background(), p, nil)
			must(t, err)
			got := map[string]string{}
			for k, rec := range snap.Keys {
				if len(rec.State) > 0 {
					got[k] = string(rec.State)
				}
			}
			set := 0
			for _, tc := range snap.Torn {
				set += tc.Records
			}
			if !maps.Equal(got, committed) || (snap.Marker == nil) != (through == 0) || (snap.Marker != nil && snap.Marker.Through[0] != through) || set < tornRecords {
				t.Fatalf("seed %d, compacted %v: states %q, want %q; marker %+v, want through %d; %d records set aside, the last owner tore %d",
					seed, compacted, got, committed, snap.Marker, through, set, tornRecords)
			}
		}
	}
}

// compactBefore compacts log as Kafka's cleaner does with its active
// segment starting at position head: a record before head is removed when
// a later record before head has the same record key. Positions are not
// kept (the memory store numbers its entries), which changes nothing here.
func compactBefore(log []Entry, head int) []Entry {
	last := map[string]int{}
	for i, e := range log[:head] {
		last[e.Key] = i
	}
	var out []Entry
	for i, e := range log {
		if i < head && last[e.Key] != i {
			continue
		}
		out = append(out, e)
	}
	return out
}
