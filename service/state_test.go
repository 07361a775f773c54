package service

import (
	"bytes"
	"context"
	"fmt"
	"github.com/driftstream/driftstream/internal/kafkatest"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/driftstream/driftstream/keystore"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A new service removes the key stores a former process left in its state
// directory, and nothing else; it refuses a cache of no keys.
func TestStateDirDropsFormerKeyStores(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"keys-p0-1", "keys-p3-17", "other"} {
		if err := os.MkdirAll(filepath.Join(dir, d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "keys-p9-note"), []byte("a file, not a store"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Service{cfg: Config{StateDir: dir, CacheKeys: 10}, log: slog.New(slog.DiscardHandler), count: newCounters()}
	if err := s.prepareStateDir(); err != nil {
		t.Fatal(err)
	}
	if left, want := entryNames(dir), []string{"keys-p9-note", "other"}; !slices.Equal(left, want) {
		t.Fatalf("state dir holds %v, want %v", left, want)
	}
	s.cfg.CacheKeys = 0
	if err := s.prepareStateDir(); err == nil {
		t.Fatal("a key store with no keys in memory was accepted")
	}
	ks, err := (&Service{cfg: Config{StateDir: dir, CacheKeys: 1}, log: s.log}).openKeyStore(3)
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	if _, err := os.Stat(filepath.Join(dir, "keys-p3-1")); err != nil {
		t.Fatalf("partition 3's first key store: %v", err)
	}
}

// driftstream_state_dir_bytes is the sum of the files under the state
// directory, in every subdirectory, read at most once a second; a missing
// directory is 0 bytes.
func TestStateDirBytes(t *testing.T) {
	dir := t.TempDir()
	for path, size := range map[string]int{"keys-p0-1/000001.sst": 1000, "keys-p0-1/MANIFEST": 37, "keys-p2-4/archive/x": 5, "top": 2} {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "top"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if n, err := dirBytes(dir); err != nil || n != 1044 {
		t.Fatalf("dirBytes = %d, %v; want 1044", n, err)
	}
	if n, err := dirBytes(filepath.Join(dir, "missing")); err != nil || n != 0 {
		t.Fatalf("a missing directory: %d, %v", n, err)
	}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{cfg: Config{StateDir: dir, Metrics: m}, log: slog.New(slog.DiscardHandler), count: newCounters()}
	s.measureStateDir()
	if err := os.WriteFile(filepath.Join(dir, "more"), make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	s.measureStateDir() // within the second: not read again
	if v := testutil.ToFloat64(m.stateDirBytes); v != 1044 {
		t.Fatalf("gauge %v, want 1044", v)
	}
	s.stateDirMeasured.Store(0)
	s.measureStateDir()
	if v := testutil.ToFloat64(m.stateDirBytes); v != 1144 {
		t.Fatalf("gauge %v after the file was added, want 1144", v)
	}
}

// With ParkState, a service that shuts down parks every partition's key
// store in its state directory, and the next service on that directory
// resumes each partition from it without reading the changelog; when
// another member wrote to the partition's changelog in between, it reads
// only what that member wrote (caught up). Either way every event is
// predicted exactly once and the end state is bit-identical to an
// uninterrupted run.
func TestParkedStateSurvivesARestart(t *testing.T) {
	for _, between := range []bool{false, true} {
		t.Run(map[bool]string{false: "nothing in between", true: "another member in between"}[between], func(t *testing.T) {
			addr := cluster(t)
			cfg := testConfig(t, addr, "g-park")
			cfg.StateDir, cfg.CacheKeys, cfg.ParkState = t.TempDir(), 2, true
			if _, err := New(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			ids := produce(t, addr, 1, 900)
			runUntil(t, cfg, int64(len(ids)))
			parked := 0
			for p := range partitions {
				if keystore.Parked(filepath.Join(cfg.StateDir, fmt.Sprintf("parked-p%d", p))) {
					parked++
				}
			}
			if parked != partitions {
				t.Fatalf("%d of %d partitions parked at shutdown", parked, partitions)
			}
			ids = append(ids, produce(t, addr, 2, 300)...)
			if between { // a member with a state dir of its own takes every partition
				other := cfg
				other.StateDir = t.TempDir()
				runUntil(t, other, 300)
			}
			ids = append(ids, produce(t, addr, 3, 300)...)
			s, stop := started(t, cfg)
			left := map[bool]int64{false: 600, true: 300}[between] // events since the last member stopped
			eventually(t, 60*time.Second, func() bool { return s.Totals().Events >= left }, func() string { return fmt.Sprintf("%+v", s.Totals()) })
			stop()
			wantCaughtUp := map[bool]int64{false: 0, true: partitions}[between]
			if tot := s.Totals(); tot.ResumedFromParked != partitions || tot.ResumedFromMemory != 0 || tot.CaughtUp != wantCaughtUp {
				t.Fatalf("%d partitions resumed from their parked stores (%d of them caught up), %d from memory; want %d (%d), 0", tot.ResumedFromParked, tot.CaughtUp, tot.ResumedFromMemory, partitions, wantCaughtUp)
			}
			if missing, repeated := deliveries(ids, predictionsByID(t, addr)); missing != 0 || repeated != 0 {
				t.Fatalf("%d events: %d predictions missing, %d repeated", len(ids), missing, repeated)
			}
			statesMatchAnUninterruptedRun(t, addr, cfg)
		})
	}
}

// A new service keeps a parked key store only with ParkState and only when
// its Park finished (the manifest is there); it removes the others, and
// refuses ParkState without a state directory.
func TestStateDirKeepsFinishedParkedStores(t *testing.T) {
	for _, park := range []bool{false, true} {
		dir := t.TempDir()
		for _, p := range []string{"parked-p1", "parked-p2"} {
			s, err := keystore.Open(filepath.Join(dir, "open-"+p), keystore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Park(filepath.Join(dir, p), []byte("m")); err != nil {
				t.Fatal(err)
			}
		}
		reopened, _, err := keystore.Reopen(filepath.Join(dir, "parked-p2"), keystore.Options{}) // reopened, then the process died
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reopened.Close() }) // its files are gone by then; this releases the database
		s := &Service{cfg: Config{StateDir: dir, CacheKeys: 10, ParkState: park}, log: slog.New(slog.DiscardHandler), count: newCounters()}
		if err := s.prepareStateDir(); err != nil {
			t.Fatal(err)
		}
		if left, want := entryNames(dir), map[bool][]string{false: nil, true: {"parked-p1"}}[park]; !slices.Equal(left, want) {
			t.Fatalf("ParkState %v: state dir holds %v, want %v", park, left, want)
		}
	}
	s := &Service{cfg: Config{ParkState: true}, log: slog.New(slog.DiscardHandler), count: newCounters()}
	if err := s.prepareStateDir(); err == nil {
		t.Fatal("ParkState without a state dir was accepted")
	}
}

// entryNames lists the names in directory dir, sorted (none when it cannot
// be read).
func entryNames(dir string) []string {
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// A rolling update with ParkState: a second member joins and takes some
// partitions (the first parks their key stores as they go), then leaves,
// and the partitions come back to the first, which catches each up from
// what the second wrote to its changelog instead of restoring it. The
// first member restores only at its start (3 restores in all), every
// event is predicted, and the end state is bit-identical to an
// uninterrupted run.
func TestRollingUpdateCatchesUpParkedPartitions(t *testing.T) {
	kafkatest.Slow(t)
	addr := cluster(t)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, addr, "g-rolling")
	cfg.StateDir, cfg.CacheKeys, cfg.ParkState, cfg.Metrics = t.TempDir(), 2, true, m
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	ids := produce(t, addr, 1, 600)
	a, stopA := started(t, cfg)
	eventually(t, 60*time.Second, func() bool { return a.Totals().Events >= 600 }, func() string { return fmt.Sprintf("%+v", a.Totals()) })
	other := cfg
	other.StateDir, other.Metrics = t.TempDir(), nil
	b, stopB := started(t, other)
	eventually(t, 60*time.Second, func() bool { return b.Assigned() > 0 }, func() string { return "the second member never got a partition" })
	ids = append(ids, produce(t, addr, 2, 600)...)
	eventually(t, 60*time.Second, func() bool { return a.Totals().Events+b.Totals().Events >= 1200 && b.Totals().Events > 0 },
		func() string { return fmt.Sprintf("%+v / %+v", a.Totals(), b.Totals()) })
	stopB()
	ids = append(ids, produce(t, addr, 3, 300)...)
	eventually(t, 60*time.Second, func() bool { return a.Totals().Events+b.Totals().Events >= 1500 && a.Assigned() == partitions },
		func() string { return fmt.Sprintf("%+v / %+v", a.Totals(), b.Totals()) })
	stopA()

	tot := a.Totals()
	restores := -1.0
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "driftstream_restore_duration_seconds" {
			restores = float64(f.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	if tot.ResumedFromParked < 1 || tot.CaughtUp != tot.ResumedFromParked || restores != partitions {
		t.Fatalf("first member: %d partitions unparked, %d of them caught up, %v full restores; want ≥ 1, all, %d (at its start only)", tot.ResumedFromParked, tot.CaughtUp, restores, partitions)
	}
	missing, repeated := deliveries(ids, predictionsByID(t, addr))
	if missing != 0 {
		t.Fatalf("%d events: %d predictions missing", len(ids), missing)
	}
	statesMatchAnUninterruptedRun(t, addr, cfg)
	t.Logf("events: first member %d, second %d; %d partitions unparked and caught up, %d resumed from memory; %d predictions repeated",
		tot.Events, b.Totals().Events, tot.ResumedFromParked, tot.ResumedFromMemory, repeated)
}

// statesMatchAnUninterruptedRun fails t unless the changelog holds the 20
// keys of produce, each bit-identical to one uninterrupted run of cfg.
func statesMatchAnUninterruptedRun(t *testing.T, addr string, cfg Config) {
	t.Helper()
	want, got := referenceStates(t, addr, cfg), changelogStates(t, addr)
	differing := 0
	for k, b := range want {
		if !bytes.Equal(got[k], b) {
			differing++
		}
	}
	if len(want) != 20 || len(got) != len(want) || differing != 0 {
		t.Fatalf("%d keys in the changelog, %d in an uninterrupted run, %d differing", len(got), len(want), differing)
	}
}
