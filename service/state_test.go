package service

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

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
	s := &Service{cfg: Config{StateDir: dir, CacheKeys: 10}, log: slog.New(slog.DiscardHandler)}
	if err := s.prepareStateDir(); err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"keys-p9-note", "other"}; !slices.Equal(left, want) {
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
	s := &Service{cfg: Config{StateDir: dir, Metrics: m}, log: slog.New(slog.DiscardHandler)}
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
