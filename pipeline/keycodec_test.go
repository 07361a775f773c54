package pipeline

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
)

// Key states written in version 1 (testdata/keystate-v1.golden, made by the
// codec before it had a header, under goldenConfig) still decode, and are
// written back as the same sections behind the version-2 header (and an
// empty mixture, the section version 2 added): a
// changelog written by an older build restores into this one unchanged.
func TestKeyStateVersion1Decodes(t *testing.T) {
	w, err := NewWorker(goldenConfig(t), 0)
	if err != nil {
		t.Fatal(err)
	}
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
		ks, err := w.decodeState(&checkpoint.KeyRecord{Key: key, State: v1})
		if err != nil {
			t.Fatalf("key %s: %v", key, err)
		}
		v2, err := encodeState(ks)
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
