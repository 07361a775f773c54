package service

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/driftstream/driftstream/keystore"
	"github.com/driftstream/driftstream/pipeline"
)

// keyStorePrefix names the key stores' directories under StateDir:
// keys-p<partition>-<n>, n counting the stores this process opened, so that
// a store kept for a revoked partition and a new one never share a directory.
const keyStorePrefix = "keys-p"

// prepareStateDir creates StateDir and removes the key stores a previous
// process left there: a key store is a cache of the changelog, rebuilt on
// every restore, so none outlives its process.
func (s *Service) prepareStateDir() error {
	if s.cfg.StateDir == "" {
		return nil
	}
	if s.cfg.CacheKeys < 1 {
		return fmt.Errorf("state dir %s: %d keys in memory per partition: must be ≥ 1", s.cfg.StateDir, s.cfg.CacheKeys)
	}
	if err := os.MkdirAll(s.cfg.StateDir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	entries, err := os.ReadDir(s.cfg.StateDir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), keyStorePrefix) {
			if err := os.RemoveAll(filepath.Join(s.cfg.StateDir, e.Name())); err != nil {
				return fmt.Errorf("state dir: remove a former process's key store: %w", err)
			}
			s.log.Info("removed a former process's key store", "dir", filepath.Join(s.cfg.StateDir, e.Name()))
		}
	}
	return nil
}

// measureStateDir sets driftstream_state_dir_bytes, at most once a second
// (a checkpoint's key store writes are what changes it).
func (s *Service) measureStateDir() {
	m := s.cfg.Metrics
	if m == nil || s.cfg.StateDir == "" {
		return
	}
	now, last := time.Now().UnixNano(), s.stateDirMeasured.Load()
	if now-last < int64(time.Second) || !s.stateDirMeasured.CompareAndSwap(last, now) {
		return
	}
	n, err := dirBytes(s.cfg.StateDir)
	if err != nil {
		s.log.Warn("state dir: cannot measure its size", "dir", s.cfg.StateDir, "err", err)
		return
	}
	m.stateDirBytes.Set(float64(n))
}

// dirBytes sums the sizes of the regular files under dir. A file removed
// while it is walked (Pebble drops the tables a compaction replaced) is not
// an error.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case !e.Type().IsRegular():
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}

// openKeyStore opens a new key store for partition p; nil without StateDir.
func (s *Service) openKeyStore(p int) (pipeline.KeyStore, error) {
	if s.cfg.StateDir == "" {
		return nil, nil
	}
	dir := filepath.Join(s.cfg.StateDir, fmt.Sprintf("%s%d-%d", keyStorePrefix, p, s.keyStores.Add(1)))
	ks, err := keystore.Open(dir, keystore.Options{Logger: s.log.With("partition", p)})
	if err != nil {
		return nil, fmt.Errorf("partition %d: %w", p, err)
	}
	return ks, nil
}
