package service

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
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

// parkedPrefix names the directories of parked key stores under StateDir:
// parked-p<partition>, one per partition.
const parkedPrefix = "parked-p"

// parkedDir is where partition p's key store is parked.
func (s *Service) parkedDir(p int) string {
	return filepath.Join(s.cfg.StateDir, fmt.Sprintf("%s%d", parkedPrefix, p))
}

// parkScope names the changelog a parked state belongs to.
func (s *Service) parkScope() string { return s.cfg.Group + "/" + s.cfg.Topics.Changelog }

// prepareStateDir creates StateDir and removes the key stores a previous
// process left there: a key store is a cache of the changelog, rebuilt on
// a restore, so none outlives its process unless it was parked (ParkState).
// A parked store is kept only with ParkState and only when its Park
// finished and it was not reopened since (keystore.Parked).
func (s *Service) prepareStateDir() error {
	if s.cfg.StateDir == "" {
		if s.cfg.ParkState {
			return errors.New("parking partition state needs a state dir")
		}
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
		dir := filepath.Join(s.cfg.StateDir, e.Name())
		var why string
		switch {
		case !e.IsDir():
			continue
		case strings.HasPrefix(e.Name(), keyStorePrefix):
			why = "a former process's key store"
		case !strings.HasPrefix(e.Name(), parkedPrefix):
			continue
		case !s.cfg.ParkState:
			why = "a parked key store, and DRIFTSTREAM_PARK_STATE is off"
		case !keystore.Parked(dir):
			why = "a parked key store whose parking did not finish, or that a former process reopened"
		default:
			s.log.Info("found a parked key store", "dir", dir)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("state dir: remove %s: %w", why, err)
		}
		s.log.Info("removed "+why, "dir", dir)
	}
	return nil
}

// keptOrParked returns the state kept for partition p in memory across a
// rebalance, or else the one a former process parked for it (ParkState);
// nil when there is neither. A parked store that cannot be resumed is
// removed, and the partition is restored from the changelog.
func (s *Service) keptOrParked(p int) *pipeline.Kept {
	if k := s.takeKept(p); k != nil || !s.cfg.ParkState {
		return k
	}
	dir := s.parkedDir(p)
	if !keystore.Parked(dir) {
		return nil
	}
	log := s.log.With("partition", p, "dir", dir)
	store, manifest, err := keystore.Reopen(dir, s.keyStoreOptions(log))
	if err != nil {
		log.Warn("cannot reopen the parked key store: removed; restoring from the changelog", "err", err)
		s.refuseParked()
		return nil
	}
	k, err := pipeline.Unpark(s.cfg.Pipeline, p, store, s.cfg.CacheKeys, manifest, s.parkScope())
	if err != nil {
		log.Warn("the parked key store cannot be resumed: removed; restoring from the changelog", "err", err)
		s.refuseParked()
		return nil
	}
	log.Info("reopened the parked key store; resuming from it, after reading what other members wrote to the changelog since", "keys", k.Keys())
	return k
}

// refuseParked counts a parked store that could not be resumed.
func (s *Service) refuseParked() {
	s.count.parkedRefused.Add(1)
}

// park leaves partition p's kept state on disk for the next process
// (ParkState); on failure the state is dropped and the next process
// restores the partition from the changelog.
func (s *Service) park(p int, k *pipeline.Kept) {
	start, keys := time.Now(), k.Keys()
	if err := k.Park(s.parkedDir(p), s.parkScope()); err != nil {
		s.log.Warn("cannot park the partition's key store: the next process will restore it from the changelog", "partition", p, "err", err)
		return
	}
	s.log.Info("parked the partition's key store", "partition", p, "keys", keys, "dir", s.parkedDir(p), "park_ms", time.Since(start).Milliseconds())
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

// keyStoreOptions are Config.KeyStore with log as their logger.
func (s *Service) keyStoreOptions(log *slog.Logger) keystore.Options {
	o := s.cfg.KeyStore
	o.Logger = log
	return o
}

// openKeyStore opens a new key store for partition p; nil without StateDir.
func (s *Service) openKeyStore(p int) (pipeline.KeyStore, error) {
	if s.cfg.StateDir == "" {
		return nil, nil
	}
	dir := filepath.Join(s.cfg.StateDir, fmt.Sprintf("%s%d-%d", keyStorePrefix, p, s.keyStores.Add(1)))
	ks, err := keystore.Open(dir, s.keyStoreOptions(s.log.With("partition", p)))
	if err != nil {
		return nil, fmt.Errorf("partition %d: %w", p, err)
	}
	return ks, nil
}
