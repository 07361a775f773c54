package service

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
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
