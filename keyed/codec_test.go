package keyed

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/topics"
)

// Key states written in version 1 (testdata/keystate-v1.golden, made by the
// codec before it had a header, under goldenConfig) still decode, and are
// written back as the same sections behind the version-2 header (and an
// empty mixture, the section version 2 added): a
// changelog written by an older build restores into this one unchanged.
func TestKeyStateVersion1Decodes(t *testing.T) {
	m := testModel(t, goldenConfig(t))
	f, err := os.Open("testdata/keystate-v1.golden")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys, pending, withStats := 0, 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		key, hx, _ := strings.Cut(sc.Text(), " ")
		v1, err := hex.DecodeString(hx)
		if err != nil || len(v1) == 0 || v1[0] == 0 {
			t.Fatalf("key %s: a version-1 state cannot start with 0 (%v)", key, err)
		}
		ks, err := m.Decode(&checkpoint.KeyRecord{Key: key, State: v1})
		if err != nil {
			t.Fatalf("key %s: %v", key, err)
		}
		v2, err := ks.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(v2, append(append([]byte{0, stateVersion}, v1...), 0)) {
			t.Fatalf("key %s: written back as %d bytes, want the %d of version 1 behind the header, and no mixture", key, len(v2), len(v1))
		}
		keys++
		pending += len(ks.pending())
		if ks.stats.events > 0 {
			withStats++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// The golden keys carry the sections the test is about.
	if keys != 5 || pending == 0 || withStats != keys {
		t.Fatalf("%d keys, %d pending events, %d with counters: the golden file does not cover the sections", keys, pending, withStats)
	}
}

// A key state written before pending queries kept their prediction still
// restores: its queries are learned when answered, but not scored.
func TestKeyStateWithoutDecidedPredictions(t *testing.T) {
	m := testModel(t, testSettings(t, "lasec-ss", `{"a":5}`))
	ks, err := m.NewState("k")
	if err != nil {
		t.Fatal(err)
	}
	x, _ := m.s.Vector.Vector(topics.Event{X: []float64{1, 2, 3, 4}})
	ks.waiting().pending = []pending{{id: "a", offset: 3, x: x, decided: 1, score: 0.5, queried: true}, {id: "b", offset: 4, decided: -1, score: -2}}
	b, err := ks.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	wb, _ := encodeWatch(nil, ks.watch)
	watchLen, statsLen := len(wb), len(encodeStats(nil, &ks.stats))+1 // and an empty input-statistics section
	v1 := b[2 : len(b)-1]                                             // version 1 had no header and no mixture
	for _, tc := range []struct {
		name  string
		state []byte
		want  []int
	}{
		{"current", b, []int{1, -1}},
		{"version 1", v1, []int{1, -1}},
		{"version 1 before key counters", v1[:len(v1)-statsLen], []int{1, -1}},
		{"version 1, older", v1[:len(v1)-statsLen-watchLen-2*11], []int{0, 0}},
	} {
		got, err := m.Decode(&checkpoint.KeyRecord{Key: "k", State: tc.state})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if pend := got.pending(); len(pend) != 2 || pend[0].decided != tc.want[0] || pend[1].decided != tc.want[1] {
			t.Fatalf("%s: pending %+v", tc.name, pend)
		}
	}
	for _, cut := range []struct {
		name  string
		state []byte
	}{
		{"a cut extension", v1[:len(v1)-4]},
		{"version 2 without its mixture", b[:len(b)-1]},
		{"version 2 without its key counters", b[:len(b)-1-statsLen]},
		{"version 2 cut anywhere", b[:len(b)-3]},
		{"version 2 with a byte more", append(slices.Clone(b), 0)},
		{"version 3", append([]byte{0, 3}, b[2:]...)},
	} {
		if _, err := m.Decode(&checkpoint.KeyRecord{Key: "k", State: cut.state}); err == nil {
			t.Errorf("%s decoded", cut.name)
		}
	}
}
