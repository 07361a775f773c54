package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestRecordRoundTripAndEveryBitFlipIsCaught(t *testing.T) {
	k := KeyRecord{Partition: 3, Key: "device-7", Epoch: NextEpoch(0, 4), AppliedThrough: [2]int64{1041, NoOffset}, State: []byte("learner state")}
	m := Marker{Partition: 3, Epoch: NextEpoch(0, 4), Through: [2]int64{1050, 12}}
	o := Ownership{Partition: 3, Epoch: NextEpoch(0, 4), Owner: "member-1"}
	for _, want := range []Record{{Key: &k}, {Marker: &m}, {Owner: &o}} {
		var rec []byte
		switch {
		case want.Key != nil:
			rec = EncodeKey(k)
		case want.Marker != nil:
			rec = EncodeMarker(m)
		default:
			rec = EncodeOwnership(o)
		}
		got, err := Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip: %+v, want %+v", got, want)
		}
		for i := range rec {
			for bit := 0; bit < 8; bit++ {
				bad := bytes.Clone(rec)
				bad[i] ^= 1 << bit
				if _, err := Decode(bad); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("flip of byte %d bit %d not caught: %v", i, bit, err)
				}
			}
		}
		if _, err := Decode(rec[:len(rec)-1]); !errors.Is(err, ErrCorrupt) {
			t.Fatal("truncation not caught")
		}
	}
}

// Records written by the previous format (version 1, no epoch) still load,
// with epoch 0, so an upgrade keeps its checkpoints.
// Records written by earlier builds are in changelogs: the bytes of each
// kind are pinned (hex from the build before AppendKey), so that a change
// of the format cannot pass as a refactoring.
func TestRecordBytesAreStable(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"key", EncodeKey(KeyRecord{Partition: 2, Key: "device-7", Epoch: NextEpoch(0, 3), AppliedThrough: [2]int64{41, NoOffset}, State: []byte{1, 2, 3}}),
			"014b575c5759028380808010086465766963652d37520103010203"},
		{"empty key", EncodeKey(KeyRecord{Key: "empty"}), "014b8da72d22000005656d707479000000"},
		{"marker", EncodeMarker(Marker{Partition: 1, Epoch: 5, Through: [2]int64{100, 7}, Reread: 40, Digest: 0x0807060504030201}), "014dd04cf3d60105c8010e28000102030405060708"},
		{"marker with peers", EncodeMarker(Marker{Partition: 1, Epoch: 5, Through: [2]int64{100, 7}, Peers: [][2]int64{{NoOffset, NoOffset}, {41, 9}}}), "014daf6867320105c8010e00010152120000000000000000"},
		{"ownership", EncodeOwnership(Ownership{Partition: 0, Epoch: NextEpoch(1<<32, 9), Owner: "host-1/pid-42"}),
			"014f48e4ad2c0089808080200d686f73742d312f7069642d3432"},
	} {
		if got := fmt.Sprintf("%x", tc.got); got != tc.want {
			t.Errorf("%s record: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// AppendKey lays a record after what the buffer holds, without an
// allocation when the buffer has room; DecodeOwned reads its state in
// place, Decode copies it.
func TestAppendKeyAndDecodeOwned(t *testing.T) {
	k := KeyRecord{Partition: 1, Key: "k", Epoch: 7, AppliedThrough: [2]int64{3, NoOffset}, State: []byte("state")}
	buf := AppendKey([]byte("prefix"), k)
	if !bytes.HasPrefix(buf, []byte("prefix")) || !bytes.Equal(buf[6:], EncodeKey(k)) {
		t.Fatalf("AppendKey gave %x", buf)
	}
	reuse := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { reuse = AppendKey(reuse[:0], k) }); n != 0 {
		t.Fatalf("AppendKey into a buffer with room: %v allocations", n)
	}
	for _, tc := range []struct {
		name   string
		decode func([]byte) (Record, error)
		shared bool
	}{{"Decode", Decode, false}, {"DecodeOwned", DecodeOwned, true}} {
		data := EncodeKey(k)
		rec, err := tc.decode(data)
		if err != nil || rec.Key == nil || !reflect.DeepEqual(*rec.Key, k) {
			t.Fatalf("%s: %+v, %v", tc.name, rec.Key, err)
		}
		data[len(data)-1] = 'X'
		if shared := rec.Key.State[len(k.State)-1] == 'X'; shared != tc.shared {
			t.Fatalf("%s: state shares the input's memory: %v, want %v", tc.name, shared, tc.shared)
		}
	}
}

// One format version: a record of another (the formats before the first
// release numbered key records up to 2 and markers up to 4) is refused as
// corrupt, never read as something else.
func TestOtherVersionsAreRefused(t *testing.T) {
	framed := func(version, kind byte, body []byte) []byte {
		out := []byte{version, kind}
		out = binary.BigEndian.AppendUint32(out, crc32.Checksum(body, castagnoli))
		return append(out, body...)
	}
	key := EncodeKey(KeyRecord{Partition: 2, Key: "k", AppliedThrough: [2]int64{40, -1}, State: []byte("st")})
	marker := EncodeMarker(Marker{Partition: 2, Through: [2]int64{41, -1}})
	owner := EncodeOwnership(Ownership{Partition: 2, Epoch: 7})
	for _, tc := range []struct {
		name string
		rec  []byte
	}{
		{"key record, version 2", framed(2, kindKey, key[6:])},
		{"marker, version 0", framed(0, kindMarker, marker[6:])},
		{"marker, version 5", framed(5, kindMarker, marker[6:])},
		{"ownership, version 2", framed(2, kindOwner, owner[6:])},
	} {
		if _, err := Decode(tc.rec); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want corrupt", tc.name, err)
		}
	}
}

func key(p int, k string, applied int64, state string) KeyRecord {
	return KeyRecord{Partition: p, Key: k, AppliedThrough: [2]int64{applied, NoOffset}, State: []byte(state)}
}

func at(e Epoch, recs ...KeyRecord) []KeyRecord {
	for i := range recs {
		recs[i].Epoch = e
	}
	return recs
}

func marker(p int, e Epoch, through int64) Marker {
	return Marker{Partition: p, Epoch: e, Through: [2]int64{through, NoOffset}}
}

// storeCase is one Store implementation under the conformance suite.
type storeCase struct {
	name string
	open func(t *testing.T) Store
}

func storeCases() []storeCase {
	return []storeCase{
		{"file", func(t *testing.T) Store {
			s, err := NewFileStore(t.TempDir(), 0)
			must(t, err)
			return s
		}},
		{"memory", func(*testing.T) Store { return NewMemoryStore() }},
		{"kafka", openKafkaStore},
	}
}

// TestStoreConformance runs the Store contract against every store.
func TestStoreConformance(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			for _, c := range conformance {
				t.Run(c.name, func(t *testing.T) { c.run(t, sc.open(t)) })
			}
		})
	}
}

var conformance = []struct {
	name string
	run  func(t *testing.T, s Store)
}{
	{"empty", func(t *testing.T, s Store) {
		snap, err := s.Load(context.Background(), 1, nil)
		if err != nil || snap.Marker != nil || len(snap.Keys) != 0 || snap.Owner != nil || snap.ReplayFrom() != [2]int64{0, 0} {
			t.Fatalf("empty store: %+v %v", snap, err)
		}
	}},
	{"latest record wins", func(t *testing.T, s Store) {
		ctx := context.Background()
		e := NextEpoch(0, 1)
		must(t, s.Claim(ctx, Ownership{Partition: 1, Epoch: e, Owner: "m"}))
		must(t, s.Write(ctx, at(e, key(1, "a", 10, "a1"), key(1, "b", 12, "b1")), marker(1, e, 12)))
		must(t, s.Write(ctx, at(e, key(1, "a", 20, "a2")), marker(1, e, 25)))
		snap, err := s.Load(ctx, 1, nil)
		must(t, err)
		if string(snap.Keys["a"].State) != "a2" || string(snap.Keys["b"].State) != "b1" || len(snap.Keys) != 2 || len(snap.Corrupt) != 0 || snap.Fenced != 0 {
			t.Fatalf("%+v", snap)
		}
		if snap.ReplayFrom() != [2]int64{26, 0} || snap.Owner == nil || snap.Owner.Epoch != e || snap.MaxEpoch != e {
			t.Fatalf("replay from %v, owner %+v", snap.ReplayFrom(), snap.Owner)
		}
		if other, _ := s.Load(ctx, 0, nil); len(other.Keys) != 0 {
			t.Fatalf("partition 0 sees %d keys of partition 1", len(other.Keys))
		}
	}},
	{"bad writes refused", func(t *testing.T, s Store) {
		ctx := context.Background()
		if err := s.Write(ctx, []KeyRecord{key(1, "z", 5, "z")}, Marker{Partition: 0}); err == nil {
			t.Fatal("a key of another partition was accepted")
		}
		if err := s.Write(ctx, []KeyRecord{key(0, reservedPrefix+"marker-0", 5, "z")}, Marker{Partition: 0}); err == nil {
			t.Fatal("a reserved key was accepted")
		}
	}},
	{"zombie writes are fenced", func(t *testing.T, s Store) {
		ctx := context.Background()
		old := NextEpoch(0, 3)
		must(t, s.Claim(ctx, Ownership{Partition: 1, Epoch: old, Owner: "first"}))
		must(t, s.Write(ctx, at(old, key(1, "a", 10, "a@10"), key(1, "b", 11, "b@11")), marker(1, old, 11)))
		snap, _ := s.Load(ctx, 1, nil)
		cur := NextEpoch(snap.MaxEpoch, 4)
		must(t, s.Claim(ctx, Ownership{Partition: 1, Epoch: cur, Owner: "second"}))
		must(t, s.Write(ctx, at(cur, key(1, "a", 30, "a@30")), marker(1, cur, 40)))
		// The first owner wakes up: its later records must not count.
		must(t, s.Write(ctx, at(old, key(1, "a", 20, "a@20"), key(1, "c", 25, "c@25")), marker(1, old, 45)))
		must(t, s.Claim(ctx, Ownership{Partition: 1, Epoch: old, Owner: "first, again"}))
		snap, err := s.Load(ctx, 1, nil)
		must(t, err)
		if string(snap.Keys["a"].State) != "a@30" || string(snap.Keys["b"].State) != "b@11" || snap.Marker.Through[0] != 40 || snap.Owner.Epoch != cur {
			t.Fatalf("a=%s b=%s marker=%+v owner=%+v", snap.Keys["a"].State, snap.Keys["b"].State, snap.Marker, snap.Owner)
		}
		// c has no accepted record: its fenced one stands in, and replay starts
		// right after what it absorbed.
		if string(snap.Keys["c"].State) != "c@25" || len(snap.Corrupt) != 1 || !errors.Is(snap.Corrupt[0], ErrFenced) || snap.ReplayFrom() != [2]int64{26, 0} {
			t.Fatalf("c=%s corrupt=%v replay=%v", snap.Keys["c"].State, snap.Corrupt, snap.ReplayFrom())
		}
		if snap.Fenced != 4 || snap.MaxEpoch != cur {
			t.Fatalf("fenced %d (want a, c, the marker and the stale claim = 4), max epoch %v", snap.Fenced, snap.MaxEpoch)
		}
		// The current owner rewrites c: the stand-in no longer holds replay back.
		must(t, s.Write(ctx, at(cur, key(1, "c", 50, "c@50")), marker(1, cur, 60)))
		snap, _ = s.Load(ctx, 1, nil)
		if len(snap.Corrupt) != 0 || snap.ReplayFrom() != [2]int64{61, 0} {
			t.Fatalf("corrupt=%v replay=%v", snap.Corrupt, snap.ReplayFrom())
		}
	}},
	{"empty state supersedes", func(t *testing.T, s Store) {
		ctx := context.Background()
		e := NextEpoch(0, 0)
		must(t, s.Write(ctx, at(e, key(1, "a", 10, "a1")), marker(1, e, 10)))
		must(t, s.Write(ctx, at(e, KeyRecord{Partition: 1, Key: "a", AppliedThrough: [2]int64{NoOffset, NoOffset}}), marker(1, e, 12)))
		snap, _ := s.Load(ctx, 1, nil)
		if rec, ok := snap.Keys["a"]; !ok || len(rec.State) != 0 {
			t.Fatalf("%+v", snap.Keys)
		}
	}},
}

func TestFileStoreCorruption(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, _ := NewFileStore(dir, 0)
	must(t, s.Write(ctx, []KeyRecord{key(0, "a", 10, "a-old"), key(0, "b", 12, "b1")}, Marker{Partition: 0, Through: [2]int64{12, NoOffset}}))
	must(t, s.Write(ctx, []KeyRecord{key(0, "a", 30, "a-new")}, Marker{Partition: 0, Through: [2]int64{40, NoOffset}}))
	path := s.path(0)
	orig, _ := os.ReadFile(path)

	// Flip a byte inside a-new's state: a falls back to a-old.
	i := bytes.LastIndex(orig, []byte("a-new"))
	bad := bytes.Clone(orig)
	bad[i] ^= 0x20
	os.WriteFile(path, bad, 0o644)
	snap, _ := s.Load(ctx, 0, nil)
	if len(snap.Corrupt) != 1 || snap.Corrupt[0].Key != "a" || string(snap.Keys["a"].State) != "a-old" {
		t.Fatalf("fallback: %+v", snap)
	}
	if got := snap.ReplayFrom(); got != [2]int64{11, 0} {
		t.Fatalf("replay from %v, want a-old's applied_through + 1 = 11", got)
	}

	// A later good record of "a" supersedes the corrupt one.
	must(t, s.Write(ctx, []KeyRecord{key(0, "a", 45, "a-newer")}, Marker{Partition: 0, Through: [2]int64{50, NoOffset}}))
	snap, _ = s.Load(ctx, 0, nil)
	if len(snap.Corrupt) != 0 || string(snap.Keys["a"].State) != "a-newer" || snap.ReplayFrom() != [2]int64{51, 0} {
		t.Fatalf("superseded corruption still counted: %+v", snap.Corrupt)
	}

	// A corrupt marker is ignored: the previous marker is a safe start.
	m := EncodeMarker(Marker{Partition: 0, Through: [2]int64{40, NoOffset}})
	bad = bytes.Clone(orig)
	j := bytes.LastIndex(bad, m)
	bad[j+len(m)-1] ^= 1
	os.WriteFile(path, bad, 0o644)
	snap, _ = s.Load(ctx, 0, nil)
	if len(snap.Corrupt) != 0 || len(snap.Ignored) != 1 || snap.ReplayFrom() != [2]int64{13, 0} {
		t.Fatalf("corrupt marker: corrupt %v ignored %v replay %v", snap.Corrupt, snap.Ignored, snap.ReplayFrom())
	}
}

// A torn tail keeps every checkpoint before it (the key records of the
// checkpoint it cut, which lost its marker, are set aside: "a" keeps its
// record of the checkpoint before), and the next write cuts it off so that
// the new checkpoint is readable.
func TestFileStoreTornTail(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, _ := NewFileStore(dir, 0)
	must(t, s.Write(ctx, []KeyRecord{key(0, "a", 10, "a1")}, Marker{Partition: 0, Through: [2]int64{12, NoOffset}}))
	must(t, s.Write(ctx, []KeyRecord{key(0, "a", 30, "a2")}, Marker{Partition: 0, Through: [2]int64{40, NoOffset}}))
	orig, _ := os.ReadFile(s.path(0))
	os.WriteFile(s.path(0), orig[:len(orig)-4], 0o644)
	s2, _ := NewFileStore(dir, 0) // a restarted process
	snap, _ := s2.Load(ctx, 0, nil)
	if len(snap.Ignored) != 1 || snap.Marker == nil || snap.Marker.Through[0] != 12 || string(snap.Keys["a"].State) != "a1" || snap.ReplayFrom() != [2]int64{13, 0} ||
		len(snap.Torn) != 1 || snap.Torn[0].Records != 1 || !slices.Equal(snap.Torn[0].Keys, []string{"a"}) {
		t.Fatalf("torn tail: %+v", snap)
	}
	must(t, s2.Write(ctx, []KeyRecord{key(0, "a", 50, "a3")}, Marker{Partition: 0, Through: [2]int64{55, NoOffset}}))
	snap, _ = s2.Load(ctx, 0, nil)
	if len(snap.Ignored) != 0 || string(snap.Keys["a"].State) != "a3" || snap.Marker.Through[0] != 55 {
		t.Fatalf("after the cut: %+v", snap)
	}
}

func TestFileStoreCompaction(t *testing.T) {
	ctx := context.Background()
	s, _ := NewFileStore(t.TempDir(), 2000)
	e := NextEpoch(0, 7)
	must(t, s.Claim(ctx, Ownership{Partition: 0, Epoch: e}))
	for round := 0; round < 200; round++ {
		var keys []KeyRecord
		for k := 0; k < 5; k++ {
			keys = append(keys, key(0, fmt.Sprintf("k%d", k), int64(round*10+k), fmt.Sprintf("state %d/%d", k, round)))
		}
		must(t, s.Write(ctx, at(e, keys...), marker(0, e, int64(round*10+9))))
	}
	st, _ := os.Stat(s.path(0))
	if st.Size() > 2500 {
		t.Fatalf("log is %d bytes: never compacted", st.Size())
	}
	snap, _ := s.Load(ctx, 0, nil)
	if len(snap.Keys) != 5 || string(snap.Keys["k3"].State) != "state 3/199" || snap.Marker.Through[0] != 1999 || snap.Owner == nil || snap.Owner.Epoch != e {
		t.Fatalf("%+v", snap)
	}
}

// Compaction keeps the latest record per store key, so a zombie's record can
// replace the current owner's record of the same key. The per-epoch ownership
// records survive, so the zombie's record is still recognised as fenced, and
// replay covers what it did not absorb.
func TestFencingSurvivesCompaction(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	e1, e2 := NextEpoch(0, 1), NextEpoch(NextEpoch(0, 1), 2)
	must(t, s.Claim(ctx, Ownership{Partition: 0, Epoch: e1}))
	must(t, s.Write(ctx, at(e1, key(0, "a", 10, "a@10")), marker(0, e1, 10)))
	must(t, s.Claim(ctx, Ownership{Partition: 0, Epoch: e2}))
	must(t, s.Write(ctx, at(e2, key(0, "a", 30, "a@30")), marker(0, e2, 30)))
	must(t, s.Write(ctx, at(e1, key(0, "a", 20, "a@20")), marker(0, e1, 20)))
	latest := map[string]int{}
	log := s.Log(0)
	for i, e := range log {
		latest[e.Key] = i
	}
	var compacted []Entry
	for i, e := range log {
		if latest[e.Key] == i {
			compacted = append(compacted, e)
		}
	}
	s.SetLog(0, compacted)
	snap, _ := s.Load(ctx, 0, nil)
	if string(snap.Keys["a"].State) != "a@20" || snap.Marker == nil || snap.Marker.Epoch != e2 || snap.ReplayFrom() != [2]int64{21, 0} {
		t.Fatalf("a=%s marker=%+v replay=%v", snap.Keys["a"].State, snap.Marker, snap.ReplayFrom())
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// positioned is what the memory and Kafka stores add to Store: where their
// records land in a partition's log.
type positioned interface {
	Store
	ClaimAt(ctx context.Context, o Ownership) (int64, error)
	WriteAt(ctx context.Context, keys []KeyRecord, m Marker) (int64, error)
}

// A claim lands exactly where the previous checkpoint ended when nothing was
// written in between (also after a checkpoint split into several produce
// requests), and anywhere else when something was.
func TestPositionsTellWhetherAnythingCameBetween(t *testing.T) {
	big := strings.Repeat("s", maxBatchBytes/3)
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			s, ok := sc.open(t).(positioned)
			if !ok {
				if sc.name == "file" {
					return // the file store does not report positions
				}
				t.Fatalf("%s store reports no positions", sc.name)
			}
			ctx := context.Background()
			var keys []KeyRecord
			for i := range 7 { // over two produce requests for Kafka
				keys = append(keys, key(1, fmt.Sprintf("k%d", i), 5, big))
			}
			claim, err := s.ClaimAt(ctx, Ownership{Partition: 1, Epoch: 1, Owner: "a"})
			must(t, err)
			end, err := s.WriteAt(ctx, at(1, keys...), marker(1, 1, 5))
			must(t, err)
			if want := claim + 1 + int64(len(keys)) + 1; end != want {
				t.Fatalf("end after a claim at %d and %d records: %d, want %d", claim, len(keys)+1, end, want)
			}
			next, err := s.ClaimAt(ctx, Ownership{Partition: 1, Epoch: 2, Owner: "a"})
			must(t, err)
			if next != end {
				t.Fatalf("claim with nothing in between at %d, want %d", next, end)
			}
			// Another writer comes in between.
			end, err = s.WriteAt(ctx, at(2, key(1, "k0", 6, "x")), marker(1, 2, 6))
			must(t, err)
			_, err = s.WriteAt(ctx, at(1, key(1, "k1", 6, "zombie")), marker(1, 1, 6))
			must(t, err)
			next, err = s.ClaimAt(ctx, Ownership{Partition: 1, Epoch: 3, Owner: "a"})
			must(t, err)
			if next == end {
				t.Fatalf("claim at %d although two records came after the checkpoint that ended there", next)
			}
		})
	}
}

// A marker whose Reread goes back before offset 0 is corrupt; and a
// restore replays the events topic from Reread records before the marker's
// Through + 1.
func TestMarkerReread(t *testing.T) {
	for _, tc := range []struct {
		reread  int64
		from    int64
		corrupt bool
	}{{0, 101, false}, {1, 100, false}, {40, 61, false}, {101, 0, false}, {102, 0, true}} {
		m := Marker{Partition: 1, Epoch: 5, Through: [2]int64{100, 7}, Reread: tc.reread}
		rec, err := Decode(EncodeMarker(m))
		if tc.corrupt {
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("reread %d: %v, want corrupt", tc.reread, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(*rec.Marker, m) {
			t.Fatalf("reread %d: %+v, %v", tc.reread, rec.Marker, err)
		}
		snap := Snapshot{Marker: rec.Marker}
		if got := snap.ReplayFrom(); got != [2]int64{tc.from, 8} {
			t.Errorf("reread %d: replay from %v, want [%d 8]", tc.reread, got, tc.from)
		}
		want := tc.from
		if tc.reread == 0 {
			want = NoOffset
		}
		if got := rec.Marker.RereadFrom(); got != want {
			t.Errorf("reread %d: re-read from %d, want %d", tc.reread, got, want)
		}
	}
	if got := (*Marker)(nil).RereadFrom(); got != NoOffset {
		t.Errorf("no marker: re-read from %d, want none", got)
	}
}

// A marker's peers read back whole (nil for none, or all unread); a
// malformed peer list is corrupt.
func TestMarkerPeers(t *testing.T) {
	none := [2]int64{NoOffset, NoOffset}
	for _, tc := range []struct {
		name  string
		peers [][2]int64
		want  [][2]int64
	}{
		{"none", nil, nil},
		{"all unread", [][2]int64{none, none}, nil},
		{"two", [][2]int64{none, {0, NoOffset}, {41, 9}}, [][2]int64{none, {0, NoOffset}, {41, 9}}},
		{"one", [][2]int64{{7, 3}}, [][2]int64{{7, 3}}},
	} {
		m := Marker{Partition: 1, Epoch: 5, Through: [2]int64{100, 7}, Reread: 3, Peers: tc.peers, Digest: 99}
		rec, err := Decode(EncodeMarker(m))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(rec.Marker.Peers, tc.want) || rec.Marker.Digest != 99 {
			t.Errorf("%s: peers read back as %v, digest %d", tc.name, rec.Marker.Peers, rec.Marker.Digest)
		}
	}
	// Bodies with bad peer lists: partitions out of order, an offset below
	// −1, both topics without one, a truncated entry.
	full := EncodeMarker(Marker{Partition: 1, Epoch: 5, Through: [2]int64{100, 7}})
	base := full[6 : len(full)-9] // without the empty peer list and the digest
	for name, tail := range map[string][]byte{
		"unordered": {2, 3, 2, 2, 1, 2, 2},
		"below -1":  {1, 0, 3, 2},
		"unread":    {1, 0, 1, 1},
		"truncated": {1, 0, 2},
	} {
		body := append(slices.Clone(base), tail...)
		body = append(body, make([]byte, 8)...)
		rec := append([]byte{FormatVersion, kindMarker, 0, 0, 0, 0}, body...)
		if _, err := Decode(frame(rec, 0)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want corrupt", name, err)
		}
	}
}

// A key record's digest covers its key, applied offsets and state, not its
// writer's epoch; a record holding nothing counts as none. A snapshot's
// KeysDigest sums them, whatever the order.
func TestKeyRecordDigest(t *testing.T) {
	base := KeyRecord{Partition: 1, Key: "k", Epoch: 5, AppliedThrough: [2]int64{40, NoOffset}, State: []byte("state")}
	d := base.Digest()
	for _, tc := range []struct {
		name string
		edit func(r *KeyRecord)
		same bool
	}{
		{"another epoch", func(r *KeyRecord) { r.Epoch = 9 }, true},
		{"another partition", func(r *KeyRecord) { r.Partition = 2 }, true},
		{"another key", func(r *KeyRecord) { r.Key = "K" }, false},
		{"a key that takes a byte of the state", func(r *KeyRecord) { r.Key, r.State = "ks", []byte("tate") }, false},
		{"another events offset", func(r *KeyRecord) { r.AppliedThrough[0] = 41 }, false},
		{"another labels offset", func(r *KeyRecord) { r.AppliedThrough[1] = 0 }, false},
		{"another state", func(r *KeyRecord) { r.State = []byte("statE") }, false},
	} {
		r := base
		r.State = slices.Clone(base.State)
		tc.edit(&r)
		if got := r.Digest(); (got == d) != tc.same {
			t.Errorf("%s: digest %016x, the base's %016x: want equal %v", tc.name, got, d, tc.same)
		}
	}
	if got := (&KeyRecord{Key: "k", AppliedThrough: [2]int64{3, 4}}).Digest(); got != 0 {
		t.Errorf("a record holding nothing: digest %016x, want 0", got)
	}
	a, b := base, base
	b.Key = "other"
	s1 := Snapshot{Keys: map[string]*KeyRecord{"k": &a, "other": &b}}
	if got, want := s1.KeysDigest(), a.Digest()+b.Digest(); got != want {
		t.Errorf("KeysDigest %016x, want the sum %016x", got, want)
	}
}
