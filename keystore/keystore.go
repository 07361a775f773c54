// Package keystore keeps a partition's key records on local disk, in a
// Pebble LSM (the storage engine of CockroachDB), for a worker whose keys do
// not all fit in memory: the worker holds its hot keys and faults the others
// in from here, as Kafka Streams does with RocksDB.
//
// The store is a cache of the changelog, never the record of truth: it is
// rebuilt from the changelog on a restore, so it writes no write-ahead log,
// never syncs while in use, and starts empty. A store's directory is its
// own: Open refuses a directory that holds anything, and Close removes it.
//
// Park is the one way a store outlives its process: it flushes every
// record to the store's tables, syncs them, moves the directory where it is
// told and writes a manifest there last. Reopen takes the manifest back and
// removes it before anything else, so a store is reopened at most once per
// Park: one that was reopened, or whose Park did not finish, has no manifest
// and is never reopened (Parked reports false and the caller removes it).
package keystore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// Options size a Store's memory. The zero value takes the defaults.
type Options struct {
	// CacheBytes is Pebble's block cache (DefaultCacheBytes when 0).
	CacheBytes int64
	// MemTableBytes is the size of one memtable (DefaultMemTableBytes when
	// 0); up to two are held while one is flushed.
	MemTableBytes uint64
	// BatchBytes is how many bytes of Sets and Deletes are staged before
	// they are committed (DefaultBatchBytes when 0).
	BatchBytes int
	// Logger receives Pebble's messages (discarded when nil).
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultCacheBytes    = 32 << 20
	DefaultMemTableBytes = 16 << 20
	DefaultBatchBytes    = 4 << 20
)

// ErrClosed reports the use of a closed store.
var ErrClosed = errors.New("key store closed")

// Store is one partition's key records on disk. It is not safe for
// concurrent use: the partition's goroutine owns it, as it owns the worker.
type Store struct {
	dir   string
	db    *pebble.DB
	batch *pebble.Batch // staged writes, committed by Flush or when full
	opt   Options
}

// Open creates a store in dir, which must be missing or empty.
func Open(dir string, opt Options) (*Store, error) {
	opt, err := withDefaults(opt)
	if err != nil {
		return nil, err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("key store %s: the directory holds %d entries; a key store starts empty (it is rebuilt from the changelog)", dir, len(entries))
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("key store %s: %w", dir, err)
	}
	s := &Store{dir: dir, opt: opt}
	if err := s.open(true); err != nil {
		return nil, err
	}
	return s, nil
}

// withDefaults fills the zero options with their defaults.
func withDefaults(opt Options) (Options, error) {
	if opt.CacheBytes < 0 || opt.BatchBytes < 0 {
		return opt, fmt.Errorf("key store options: cache %d bytes, batch %d bytes: must be ≥ 0", opt.CacheBytes, opt.BatchBytes)
	}
	if opt.CacheBytes == 0 {
		opt.CacheBytes = DefaultCacheBytes
	}
	if opt.MemTableBytes == 0 {
		opt.MemTableBytes = DefaultMemTableBytes
	}
	if opt.BatchBytes == 0 {
		opt.BatchBytes = DefaultBatchBytes
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return opt, nil
}

// open opens the Pebble database in the store's directory: a new one
// (fresh), or the one a Park left there.
func (s *Store) open(fresh bool) error {
	cache := pebble.NewCache(s.opt.CacheBytes)
	defer cache.Unref() // the DB holds its own reference
	o := &pebble.Options{
		Cache:            cache,
		MemTableSize:     s.opt.MemTableBytes,
		DisableWAL:       true, // rebuilt from the changelog after any crash; Park flushes
		ErrorIfExists:    fresh,
		ErrorIfNotExists: !fresh,
		Logger:           pebbleLogger{s.opt.Logger.With("key_store", s.dir)},
	}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10) // a miss (a new key) costs no block read
		o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	db, err := pebble.Open(s.dir, o)
	if err != nil {
		return fmt.Errorf("key store %s: %w", s.dir, err)
	}
	s.db, s.batch = db, db.NewBatch()
	return nil
}

// MemoryBytes is the memory Pebble holds for the store: its block cache
// and memtables (outside the Go heap when built with cgo).
func (s *Store) MemoryBytes() int64 {
	if s.db == nil {
		return 0
	}
	m := s.db.Metrics()
	return m.BlockCache.Size + int64(m.MemTable.Size)
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Get returns key's record, false when the store has none. Staged writes
// are committed first, so Get sees every Set and Delete before it. The
// bytes are the caller's.
func (s *Store) Get(key string) ([]byte, bool, error) {
	if err := s.Flush(); err != nil {
		return nil, false, err
	}
	v, closer, err := s.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("key store %s: get %q: %w", s.dir, key, err)
	}
	out := append([]byte(nil), v...)
	return out, true, closer.Close()
}

// Set stages key's record, replacing any earlier one. The store keeps a
// copy: the caller may reuse record.
func (s *Store) Set(key string, record []byte) error {
	if s.db == nil {
		return fmt.Errorf("key store %s: set %q: %w", s.dir, key, ErrClosed)
	}
	if err := s.batch.Set([]byte(key), record, nil); err != nil {
		return fmt.Errorf("key store %s: set %q: %w", s.dir, key, err)
	}
	return s.commitIfFull()
}

// Delete stages the removal of key's record.
func (s *Store) Delete(key string) error {
	if s.db == nil {
		return fmt.Errorf("key store %s: delete %q: %w", s.dir, key, ErrClosed)
	}
	if err := s.batch.Delete([]byte(key), nil); err != nil {
		return fmt.Errorf("key store %s: delete %q: %w", s.dir, key, err)
	}
	return s.commitIfFull()
}

func (s *Store) commitIfFull() error {
	if len(s.batch.Repr()) < s.opt.BatchBytes {
		return nil
	}
	return s.Flush()
}

// Flush commits the staged writes (unsynced: the changelog is what survives
// a crash).
func (s *Store) Flush() error {
	if s.db == nil {
		return fmt.Errorf("key store %s: %w", s.dir, ErrClosed)
	}
	if s.batch.Empty() {
		return nil
	}
	if err := s.batch.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("key store %s: commit %d records: %w", s.dir, s.batch.Count(), err)
	}
	s.batch.Reset()
	return nil
}

// Reset drops every record, staged or committed: the database is closed,
// its files removed, and a new one opened in their place.
func (s *Store) Reset() error {
	if err := s.shut(); err != nil {
		return fmt.Errorf("key store %s: reset: %w", s.dir, err)
	}
	return s.open(true)
}

// shut closes the database and removes its files.
func (s *Store) shut() error {
	if s.db == nil {
		return ErrClosed
	}
	s.batch.Close()
	err := s.db.Close()
	s.db, s.batch = nil, nil
	return errors.Join(err, os.RemoveAll(s.dir))
}

// manifestFile is the file Park writes last in a parked store's directory.
const manifestFile = "DRIFTSTREAM-PARKED"

// Park leaves the store on disk for a later process: it commits the staged
// writes, flushes the memtables to tables (the store has no write-ahead
// log) and closes the database, moves its directory to dir (which must not
// exist, unless it is the store's own; on the same file system), and writes
// manifest there, synced, as the last step. The store is closed whatever
// the outcome; on error its files are removed, from wherever they are.
func (s *Store) Park(dir string, manifest []byte) (err error) {
	if s.db == nil {
		return fmt.Errorf("key store %s: park: %w", s.dir, ErrClosed)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("key store %s: park in %s: %w", s.dir, dir, errors.Join(err, os.RemoveAll(s.dir)))
		}
	}()
	err = s.Flush()
	if err == nil {
		err = s.db.Flush()
	}
	s.batch.Close()
	err = errors.Join(err, s.db.Close())
	s.db, s.batch = nil, nil
	if err != nil {
		return err
	}
	if filepath.Clean(dir) != filepath.Clean(s.dir) { // a reopened store parks in place
		if _, serr := os.Lstat(dir); serr == nil {
			return fmt.Errorf("%s exists", dir)
		}
		if err := os.Rename(s.dir, dir); err != nil {
			return err
		}
		s.dir = dir
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return err
		}
	}
	return writeSynced(filepath.Join(dir, manifestFile), manifest)
}

// Parked reports whether dir holds a store that Park finished (its
// manifest is there).
func Parked(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, manifestFile))
	return err == nil
}

// Reopen opens the store that Park left in dir and returns the manifest it
// wrote. The manifest is removed, and the removal synced, before the
// database is opened: from here on the directory is the store's as if Open
// had made it, and a crash leaves a directory that is never reopened. On
// error the directory is removed.
func Reopen(dir string, opt Options) (s *Store, manifest []byte, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("key store %s: reopen: %w", dir, errors.Join(err, os.RemoveAll(dir)))
		}
	}()
	opt, err = withDefaults(opt)
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, manifestFile)
	if manifest, err = os.ReadFile(path); err != nil {
		return nil, nil, err
	}
	if err := os.Remove(path); err != nil {
		return nil, nil, err
	}
	if err := syncDir(dir); err != nil {
		return nil, nil, err
	}
	s = &Store{dir: dir, opt: opt}
	if err := s.open(false); err != nil {
		return nil, nil, err
	}
	return s, manifest, nil
}

// writeSynced writes b to path through a synced temporary file renamed into
// place, and syncs the directory: the file is whole or absent.
func writeSynced(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes the entries of directory dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// Close closes the store and removes its directory.
func (s *Store) Close() error {
	if err := s.shut(); err != nil {
		return fmt.Errorf("key store %s: close: %w", s.dir, err)
	}
	return nil
}

// pebbleLogger routes Pebble's messages to slog. Pebble calls Fatalf on
// invariant violations and expects it not to return.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) { p.l.Debug(fmt.Sprintf(format, args...)) }
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic("pebble: " + msg)
}
