package pipeline

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/keystore"
)

// reopen reopens the store parked in dir, wrapped for counting.
func reopen(t *testing.T, dir string) (*testKeys, []byte) {
	t.Helper()
	s, manifest, err := keystore.Reopen(dir, testKeyOptions)
	if err != nil {
		t.Fatal(err)
	}
	return wrapTestKeys(t, s), manifest
}

// A partition parked at a clean stop and unparked by a later process
// resumes from the parked key store, without reading the changelog, when
// nothing was written to the changelog since; when another owner wrote in
// between, it catches up from the changelog's tail (the rolling update that
// kafka-go's lack of static membership makes the common case), and it
// restores from the changelog only when that tail is gone. Every way ends
// byte-identical to one uninterrupted run, with no prediction missing,
// differing or repeated.
func TestParkedStateResumesOnlyWhenNothingCameBetween(t *testing.T) {
	for _, tc := range []struct {
		name              string
		between, tailGone bool
	}{{"nothing in between", false, false}, {"another owner in between", true, false}, {"another owner in between, tail gone", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1200, 50, false)
			h.cacheKeys = 5
			a := h.runUntil(1, 400)
			k := a.Kept()
			if k == nil {
				t.Fatal("a clean stop kept no state")
			}
			inMemory := k.w.Resident()
			dir := filepath.Join(t.TempDir(), "parked-0")
			if err := k.Park(dir, "changelog-a"); err != nil {
				t.Fatal(err)
			}
			if inMemory == 0 || !keystore.Parked(dir) {
				t.Fatalf("%d keys in memory at the stop, parked %v: the test parks nothing worth checking", inMemory, keystore.Parked(dir))
			}
			if tc.between {
				h.runUntil(2, 700)
			}
			end := int64(len(h.store.Log(0)))
			// Reading resumes after the last record processed, or, when
			// events still await their labels, at the oldest of them, for
			// their inputs (reread.go): as the last marker says.
			snap, err := h.store.MemoryStore.Load(context.Background(), 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			store, manifest := reopen(t, dir)
			kept, err := Unpark(h.cfg, 0, store, h.cacheKeys, manifest, "changelog-a")
			if err != nil {
				t.Fatal(err)
			}
			if kept.Keys() != 50 || kept.w.Resident() != 0 {
				t.Fatalf("unparked %d keys, %d in memory; want 50, none in memory", kept.Keys(), kept.w.Resident())
			}
			loads := h.store.loads.Load()
			if tc.tailGone {
				h.store.rangeErr = checkpoint.ErrTailGone
			}
			h.kept, h.feed.bounded = kept, true
			obs := &restoredAs{}
			c := h.runner(3, newGate(1<<62), nil, obs)
			if err := c.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			resumed := !tc.tailGone
			if got := h.store.loads.Load() - loads; obs.res.Origin.Resumed() != resumed || (obs.res.Origin == FromParked) != resumed || got != map[bool]int64{true: 0, false: 1}[resumed] {
				t.Fatalf("resumed %v (unparked %v) after %d loads of the changelog; want resumed %v", obs.res.Origin.Resumed(), obs.res.Origin == FromParked, got, resumed)
			}
			wantFrom, wantCaught := int64(400)-snap.Marker.Reread, int64(0)
			if tc.between {
				wantFrom, wantCaught = 700-snap.Marker.Reread, end-kept.end
			}
			if snap.Marker.Reread == 0 {
				t.Fatal("no event awaits its label at the stop: the test does not cover re-reading inputs")
			}
			if resumed && (obs.res.From[EventsTopic] != wantFrom || obs.res.CaughtUp != wantCaught) {
				t.Fatalf("resumed reading events from offset %d after catching up %d positions; want %d, %d", obs.res.From[EventsTopic], obs.res.CaughtUp, wantFrom, wantCaught)
			}
			if resumed == store.isClosed() {
				t.Fatalf("the parked store closed %v; want %v (closed when not resumed)", store.isClosed(), !resumed)
			}
			if dups := h.check(c); dups != 0 {
				t.Fatalf("%d predictions repeated", dups)
			}
		})
	}
}

// Unpark refuses a manifest that is not the partition's under the same
// changelog and configuration, or is damaged, and closes (removes) the
// store; Park fails whole when the key store fails, leaving nothing that
// could be reopened.
func TestUnparkRefusesAnotherState(t *testing.T) {
	park := func(t *testing.T) (*harness, string) {
		h := newHarness(t, 400, 20, false)
		h.cacheKeys = 5
		a := h.runUntil(1, 200)
		dir := filepath.Join(t.TempDir(), "parked-0")
		if err := a.Kept().Park(dir, "changelog-a"); err != nil {
			t.Fatal(err)
		}
		return h, dir
	}
	otherParams := func(h *harness) Config { c := h.cfg; c.Params = json.RawMessage(`{"a":0.5}`); return c }
	otherLearner := func(h *harness) Config { c := h.cfg; c.Learner, c.Params = "perceptron", nil; return c }
	standardized := func(h *harness) Config { c := h.cfg; c.Standardize = true; return c }
	detectors := func(h *harness) Config {
		c := h.cfg
		c.Detectors = []keyed.DetectorSpec{{Detector: "adwin", Signal: "mistakes"}}
		return c
	}
	same := func(h *harness) Config { return h.cfg }
	for _, tc := range []struct {
		name      string
		cfg       func(*harness) Config
		partition int
		scope     string
		damage    func([]byte) []byte
	}{
		{"another partition", same, 1, "changelog-a", nil},
		{"another changelog", same, 0, "changelog-b", nil},
		{"other learner parameters", otherParams, 0, "changelog-a", nil},
		{"another learner", otherLearner, 0, "changelog-a", nil},
		{"standardized now", standardized, 0, "changelog-a", nil},
		{"drift detectors now", detectors, 0, "changelog-a", nil},
		{"a flipped byte", same, 0, "changelog-a", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{"truncated", same, 0, "changelog-a", func(b []byte) []byte { return b[:len(b)-5] }},
		{"another format", same, 0, "changelog-a", func(b []byte) []byte {
			b[len(parkMagic)] = parkVersion + 1
			n := len(b) - 4
			return binary.LittleEndian.AppendUint32(b[:n], crc32.Checksum(b[:n], crcTable))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, dir := park(t)
			store, manifest := reopen(t, dir)
			if tc.damage != nil {
				manifest = tc.damage(manifest)
			}
			k, err := Unpark(tc.cfg(h), tc.partition, store, 5, manifest, tc.scope)
			if !errors.Is(err, ErrNotParked) || k != nil {
				t.Fatalf("Unpark = %v, %v; want ErrNotParked", k, err)
			}
			if !store.isClosed() {
				t.Error("the refused store was not closed")
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused store's directory: %v, want removed", err)
			}
		})
	}
	t.Run("the key store fails while parking", func(t *testing.T) {
		for _, op := range []string{"set", "park"} {
			h := newHarness(t, 400, 20, false)
			h.cacheKeys = 5
			a := h.runUntil(1, 200)
			h.keyStores[0].arm(op, 1)
			dir := filepath.Join(t.TempDir(), "parked-0")
			if err := a.Kept().Park(dir, "changelog-a"); !errors.Is(err, errInjected) {
				t.Fatalf("Park with %s failing = %v", op, err)
			}
			if keystore.Parked(dir) || !h.keyStores[0].isClosed() {
				t.Fatalf("%s failing: parked %v, store closed %v; want nothing parked, the store closed", op, keystore.Parked(dir), h.keyStores[0].isClosed())
			}
		}
	})
	t.Run("a state without a key store", func(t *testing.T) {
		h := newHarness(t, 400, 20, false)
		a := h.runUntil(1, 200)
		if err := a.Kept().Park(filepath.Join(t.TempDir(), "p"), "changelog-a"); err == nil {
			t.Fatal("Park of a state held in memory only succeeded")
		}
	})
}

// A manifest carries the other partitions' positions (a shared part across
// partitions) after its scope, and one without them reads back without;
// a damaged peer list is refused as not parked.
func TestManifestPeers(t *testing.T) {
	for _, peers := range [][][2]int64{nil, {{-1, -1}, {41, 7}, {3, -1}}} {
		m := parkManifest{partition: 2, end: 90, epoch: 5, through: [2]int64{40, 8}, keys: 12, scope: "changelog-a", peers: peers}
		got, err := decodeManifest(m.encode())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("read back as %+v, want %+v", got, m)
		}
	}
	b := (&parkManifest{scope: "s", peers: [][2]int64{{1, 1}}}).encode()
	b = b[:len(b)-4]
	b = append(b[:len(b)-2], 0x05, 0x05) // the one peer's offsets: below −1
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	if _, err := decodeManifest(b); !errors.Is(err, ErrNotParked) {
		t.Fatalf("a damaged peer list: %v", err)
	}
}
