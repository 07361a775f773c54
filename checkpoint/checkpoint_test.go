package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"testing"
)

func TestRecordRoundTripAndEveryBitFlipIsCaught(t *testing.T) {
	k := KeyRecord{Partition: 3, Key: "device-7", AppliedThrough: [2]int64{1041, NoOffset}, State: []byte("learner state")}
	m := Marker{Partition: 3, Through: [2]int64{1050, 12}}
	for _, rec := range [][]byte{EncodeKey(k), EncodeMarker(m)} {
		gk, gm, err := Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if (gk != nil && !reflect.DeepEqual(*gk, k)) || (gm != nil && *gm != m) {
			t.Fatalf("round trip: %+v %+v", gk, gm)
		}
		for i := range rec {
			for bit := 0; bit < 8; bit++ {
				bad := bytes.Clone(rec)
				bad[i] ^= 1 << bit
				if _, _, err := Decode(bad); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("flip of byte %d bit %d not caught: %v", i, bit, err)
				}
			}
		}
		if _, _, err := Decode(rec[:len(rec)-1]); !errors.Is(err, ErrCorrupt) {
			t.Fatal("truncation not caught")
		}
	}
}

func key(p int, k string, applied int64, state string) KeyRecord {
	return KeyRecord{Partition: p, Key: k, AppliedThrough: [2]int64{applied, NoOffset}, State: []byte(state)}
}

func TestFileStoreLatestWins(t *testing.T) {
	ctx := context.Background()
	s, err := NewFileStore(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if snap, err := s.Load(ctx, 0); err != nil || snap.Marker != nil || len(snap.Keys) != 0 || snap.ReplayFrom() != [2]int64{0, 0} {
		t.Fatalf("empty store: %+v %v", snap, err)
	}
	must(t, s.Write(ctx, []KeyRecord{key(0, "a", 10, "a1"), key(0, "b", 12, "b1")}, Marker{Partition: 0, Through: [2]int64{12, NoOffset}}))
	must(t, s.Write(ctx, []KeyRecord{key(0, "a", 20, "a2")}, Marker{Partition: 0, Through: [2]int64{25, NoOffset}}))
	must(t, s.Write(ctx, []KeyRecord{key(1, "z", 5, "z1")}, Marker{Partition: 1, Through: [2]int64{5, NoOffset}}))
	snap, err := s.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(snap.Keys["a"].State) != "a2" || string(snap.Keys["b"].State) != "b1" || len(snap.Keys) != 2 || len(snap.Corrupt) != 0 {
		t.Fatalf("%+v", snap)
	}
	if snap.ReplayFrom() != [2]int64{26, 0} {
		t.Fatalf("replay from %v", snap.ReplayFrom())
	}
	if err := s.Write(ctx, []KeyRecord{key(1, "z", 5, "z")}, Marker{Partition: 0}); err == nil {
		t.Fatal("a key of another partition was accepted")
	}
}

// A corrupt record falls back to the key's previous good record and lowers
// the replay start to what that record absorbed; an unreadable key forces a
// full replay; a torn tail keeps everything before it.
func TestFileStoreCorruption(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, _ := NewFileStore(dir, 0)
	must(t, s.Write(ctx, []KeyRecord{key(0, "a", 10, "a-old"), key(0, "b", 12, "b1")}, Marker{Partition: 0, Through: [2]int64{12, NoOffset}}))
	must(t, s.Write(ctx, []KeyRecord{key(0, "a", 30, "a-new")}, Marker{Partition: 0, Through: [2]int64{40, NoOffset}}))
	path := s.path(0)
	orig, _ := os.ReadFile(path)

	// Flip a byte inside a-new's state.
	i := bytes.LastIndex(orig, []byte("a-new"))
	bad := bytes.Clone(orig)
	bad[i] ^= 0x20
	os.WriteFile(path, bad, 0o644)
	snap, _ := s.Load(ctx, 0)
	if len(snap.Corrupt) != 1 || snap.Corrupt[0].Key != "a" || string(snap.Keys["a"].State) != "a-old" {
		t.Fatalf("fallback: %+v", snap)
	}
	if got := snap.ReplayFrom(); got != [2]int64{11, 0} {
		t.Fatalf("replay from %v, want a-old's applied_through + 1 = 11", got)
	}

	// A later good record of "a" supersedes the corrupt one.
	os.WriteFile(path, bad, 0o644)
	must(t, s.Write(ctx, []KeyRecord{key(0, "a", 45, "a-newer")}, Marker{Partition: 0, Through: [2]int64{50, NoOffset}}))
	snap, _ = s.Load(ctx, 0)
	if len(snap.Corrupt) != 0 || string(snap.Keys["a"].State) != "a-newer" || snap.ReplayFrom() != [2]int64{51, 0} {
		t.Fatalf("superseded corruption still counted: %+v", snap.Corrupt)
	}

	// Garble the key in the clear: the key is unknown, replay from the start.
	rec := EncodeKey(key(0, "a", 30, "a-new"))
	r := bytes.Index(orig, rec) // entry: [key length 1]['a'][record length][record]
	bad = bytes.Clone(orig)
	bad[r-2] = 'q'
	os.WriteFile(path, bad, 0o644)
	snap, _ = s.Load(ctx, 0)
	if len(snap.Corrupt) == 0 || snap.ReplayFrom() != [2]int64{0, 0} {
		t.Fatalf("unknown key: %+v replay %v", snap.Corrupt, snap.ReplayFrom())
	}

	// Torn tail: the last checkpoint is cut mid-record.
	os.WriteFile(path, orig[:len(orig)-4], 0o644)
	snap, _ = s.Load(ctx, 0)
	if len(snap.Corrupt) != 1 || snap.Marker == nil || snap.Marker.Through[0] != 12 || string(snap.Keys["a"].State) != "a-new" {
		t.Fatalf("torn tail: %+v", snap)
	}
	if got := snap.ReplayFrom(); got[0] > 13 {
		t.Fatalf("torn marker: replay from %v must not pass the last good marker", got)
	}
}

func TestFileStoreCompaction(t *testing.T) {
	ctx := context.Background()
	s, _ := NewFileStore(t.TempDir(), 2000)
	for round := 0; round < 200; round++ {
		var keys []KeyRecord
		for k := 0; k < 5; k++ {
			keys = append(keys, key(0, fmt.Sprintf("k%d", k), int64(round*10+k), fmt.Sprintf("state %d/%d", k, round)))
		}
		must(t, s.Write(ctx, keys, Marker{Partition: 0, Through: [2]int64{int64(round*10 + 9), NoOffset}}))
	}
	st, _ := os.Stat(s.path(0))
	if st.Size() > 2500 {
		t.Fatalf("log is %d bytes: never compacted", st.Size())
	}
	snap, _ := s.Load(ctx, 0)
	if len(snap.Keys) != 5 || string(snap.Keys["k3"].State) != "state 3/199" || snap.Marker.Through[0] != 1999 {
		t.Fatalf("%+v", snap)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
