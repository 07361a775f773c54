package service

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

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
