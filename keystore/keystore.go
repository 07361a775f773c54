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
// Park also records the database's live tables (number and size of each),
// and Reopen opens the store only when Pebble opens exactly those: a
// MANIFEST that lost its last records (which Pebble reads as an earlier
// version of the database, silently) or a missing or resized table is
// refused with ErrDamaged.
//
// Failures reach the caller, never the process: an error of Pebble's
// background work (a flush that met a full disk) fails every later call; a
// call that waits in Pebble for longer than Options.StallTimeout (a write
// stall) fails; Pebble's Fatalf (a corrupt block) and panics fail the call
// and the store, and end only the goroutine of Pebble's that met them.
package keystore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
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
	// FS is the file system Pebble uses (the operating system's when nil);
	// tests inject disk faults through it.
	FS vfs.FS
	// noCompactions turns Pebble's compactions off (tests lay out tables).
	noCompactions bool
	// Logger receives Pebble's messages (discarded when nil), its errors at
	// most once per ten seconds with a count of the ones left out.
	Logger *slog.Logger
	// StallTimeout bounds how long a commit may wait in Pebble's write
	// stall (memtables full, a flush failing): past it the commit fails,
	// and so does the store (DefaultStallTimeout when 0).
	StallTimeout time.Duration
}

// Defaults of Options.
const (
	DefaultCacheBytes    = 32 << 20
	DefaultMemTableBytes = 16 << 20
	DefaultBatchBytes    = 4 << 20
	DefaultStallTimeout  = 30 * time.Second
)

// ErrClosed reports the use of a closed store.
var ErrClosed = errors.New("key store closed")

// ErrFailed reports a store that met an error it cannot recover from (a
// background error, a stall past its bound, a panic inside Pebble): every
// call fails with it from then on, and the caller rebuilds the store.
var ErrFailed = errors.New("key store failed")

// ErrDamaged reports a parked store that did not reopen as it was parked.
var ErrDamaged = errors.New("parked key store damaged")

// Store is one partition's key records on disk. It is not safe for
// concurrent use: the partition's goroutine owns it, as it owns the worker.
type Store struct {
	dir   string
	db    *pebble.DB
	batch *pebble.Batch // staged writes, committed by Flush or when full
	opt   Options
	// failed holds the error that failed the store (ErrFailed wrapped): set
	// by Pebble's goroutines (background errors) and by calls.
	failed atomic.Pointer[error]
	// failedCh is closed when failed is set: a commit waiting in a stall
	// gives up at once.
	failedCh   chan struct{}
	failedOnce sync.Once
	// wedged is set when a commit was abandoned in a stall: its goroutine
	// still holds the batch and the database, which are then never closed.
	wedged bool
}

// fail records the store's first unrecoverable error.
func (s *Store) fail(err error) {
	err = fmt.Errorf("key store %s: %w: %w", s.dir, ErrFailed, err)
	if s.failed.CompareAndSwap(nil, &err) {
		s.failedOnce.Do(func() { close(s.failedCh) })
	}
}

// failure is the error that failed the store, nil while it is usable.
func (s *Store) failure() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// call runs fn, a call into Pebble, on a goroutine of its own and waits for
// it, for the store's failure, or for StallTimeout, whichever comes first:
// a call that Pebble keeps waiting (a write stall, a disk that hangs) or
// whose goroutine Pebble ends (Fatalf, on a corrupt block) fails the store
// instead of its caller's goroutine. A panic in fn fails the store too.
func (s *Store) call(what string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		err := errors.New("no result")
		defer func() {
			if r := recover(); r != nil {
				s.fail(fmt.Errorf("%s: pebble panicked: %v", what, r))
				err = s.failure()
			}
			done <- err
		}()
		err = fn()
	}()
	t := time.NewTimer(s.opt.StallTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-s.failedCh:
		select {
		case err := <-done: // it ended as the store failed: its own error or the failure
			if err == nil {
				return s.failure()
			}
			return err
		default:
		}
		s.wedged = true // fn still runs, or never will end
		return s.failure()
	case <-t.C:
		s.wedged = true
		s.fail(fmt.Errorf("%s waited %s in Pebble (a write stall: is the disk full, or hung?)", what, s.opt.StallTimeout))
		return s.failure()
	}
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
	s := &Store{dir: dir, opt: opt, failedCh: make(chan struct{})}
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
	if opt.StallTimeout <= 0 {
		opt.StallTimeout = DefaultStallTimeout
	}
	return opt, nil
}

// open opens the Pebble database in the store's directory: a new one
// (fresh), or the one a Park left there.
func (s *Store) open(fresh bool) error {
	cache := pebble.NewCache(s.opt.CacheBytes)
	defer cache.Unref() // the DB holds its own reference
	o := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                s.opt.MemTableBytes,
		DisableWAL:                  true, // rebuilt from the changelog after any crash; Park flushes
		ErrorIfExists:               fresh,
		ErrorIfNotExists:            !fresh,
		Logger:                      &pebbleLogger{l: s.opt.Logger.With("key_store", s.dir), fatal: s.fail},
		FS:                          s.opt.FS,
		DisableAutomaticCompactions: s.opt.noCompactions,
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) { s.fail(fmt.Errorf("background error: %w", err)) },
		},
	}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10) // a miss (a new key) costs no block read
		o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	// Opening replays the tables' state and may start a compaction; on a
	// damaged store Pebble can call Fatalf there (which parks that goroutine,
	// see pebbleLogger) and wait for it for good. So Open runs on a
	// goroutine of its own, waited for with the stall bound and the store's
	// failure, as every call into Pebble is; on either the store is refused
	// and what Pebble holds is left to the process's end.
	type opened struct {
		db  *pebble.DB
		err error
	}
	done := make(chan opened, 1)
	go func() {
		db, err := pebble.Open(s.dir, o)
		done <- opened{db, err}
	}()
	t := time.NewTimer(s.opt.StallTimeout)
	defer t.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			return fmt.Errorf("key store %s: %w", s.dir, r.err)
		}
		s.db, s.batch = r.db, r.db.NewBatch()
		return nil
	case <-s.failedCh:
		return fmt.Errorf("opening: %w", s.failure())
	case <-t.C:
		s.fail(fmt.Errorf("opening waited %s in Pebble", s.opt.StallTimeout))
		return fmt.Errorf("opening: %w", s.failure())
	}
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
func (s *Store) Get(key string) (_ []byte, _ bool, err error) {
	if err := s.Flush(); err != nil {
		return nil, false, err
	}
	var out []byte
	found := false
	db := s.db
	err = s.call("a read", func() error {
		v, closer, err := db.Get([]byte(key))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		out, found = append([]byte(nil), v...), true
		return closer.Close()
	})
	if err != nil {
		if errors.Is(err, ErrFailed) {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("key store %s: get %q: %w", s.dir, key, err)
	}
	return out, found, nil
}

// Set stages key's record, replacing any earlier one. The store keeps a
// copy: the caller may reuse record.
func (s *Store) Set(key string, record []byte) error {
	if s.db == nil {
		return fmt.Errorf("key store %s: set %q: %w", s.dir, key, ErrClosed)
	}
	if err := s.failure(); err != nil {
		return err
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
	if err := s.failure(); err != nil {
		return err
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
// a crash). A commit that waits in Pebble's write stall for longer than
// Options.StallTimeout fails, and so does the store.
func (s *Store) Flush() (err error) {
	if s.db == nil {
		return fmt.Errorf("key store %s: %w", s.dir, ErrClosed)
	}
	if err := s.failure(); err != nil {
		return err
	}
	if s.batch.Empty() {
		return nil
	}
	batch := s.batch // the call may outlive the store's fields
	err = s.call("a commit", func() error { return batch.Commit(pebble.NoSync) })
	if err != nil {
		if errors.Is(err, ErrFailed) {
			return err
		}
		return fmt.Errorf("key store %s: commit %d records: %w", s.dir, s.batch.Count(), err)
	}
	if err := s.failure(); err != nil { // a background error while it committed
		return err
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
func (s *Store) shut() (err error) {
	if s.db == nil {
		return ErrClosed
	}
	db, batch := s.db, s.batch
	s.db, s.batch = nil, nil
	if s.wedged || s.failure() != nil {
		// A call may still wait on them, Pebble retry a flush against a full
		// disk, or a goroutine of Pebble's be parked holding its locks (a
		// Fatalf): Close would wait on them. They are left to the process's
		// end (a failed store fails its partition, and the process exits).
		return errors.Join(s.failure(), os.RemoveAll(s.dir))
	}
	defer func() {
		if r := recover(); r != nil { // a database that failed may panic closing
			err = fmt.Errorf("pebble panicked closing: %v", r)
		}
		err = errors.Join(err, os.RemoveAll(s.dir))
	}()
	batch.Close()
	return db.Close()
}

// manifestFile is the file Park writes last in a parked store's directory;
// tablesFile, written before it, lists the database's live tables.
const (
	manifestFile = "DRIFTSTREAM-PARKED"
	tablesFile   = "DRIFTSTREAM-TABLES"
)

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
	if s.wedged {
		return s.failure()
	}
	s.batch.Close()
	err = errors.Join(err, s.db.Close(), s.failure())
	s.db, s.batch = nil, nil
	if err != nil {
		return err
	}
	tables, err := liveTables(s.dir, s.opt.FS, s.opt.StallTimeout)
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
	if err := writeSynced(filepath.Join(dir, tablesFile), tables); err != nil {
		return err
	}
	return writeSynced(filepath.Join(dir, manifestFile), manifest)
}

// liveTables lists the live tables of the database in dir, one "number
// size" line each, in number order, from a read-only open (which neither
// flushes nor compacts, so the list is the database's as it is on disk).
func liveTables(dir string, fs vfs.FS, bound time.Duration) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	fatal := make(chan error, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r.err = fmt.Errorf("pebble panicked listing tables: %v", p)
			}
			done <- r
		}()
		logger := &pebbleLogger{l: slog.New(slog.DiscardHandler), fatal: func(err error) {
			select {
			case fatal <- err:
			default:
			}
		}}
		db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, ErrorIfNotExists: true, FS: fs, Logger: logger})
		if err != nil {
			r.err = err
			return
		}
		levels, err := db.SSTables()
		r.err = errors.Join(err, db.Close())
		var lines []string
		for _, level := range levels {
			for _, t := range level {
				lines = append(lines, fmt.Sprintf("%d %d", t.FileNum, t.Size))
			}
		}
		slices.Sort(lines)
		var b bytes.Buffer
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
		r.b = b.Bytes()
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case r := <-done:
		return r.b, r.err
	case err := <-fatal:
		return nil, err
	case <-t.C: // a hung disk: what Pebble holds is left to the process's end
		return nil, fmt.Errorf("listing the tables waited %s in Pebble", bound)
	}
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
	parked, err := os.ReadFile(filepath.Join(dir, tablesFile))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: no list of its tables (parked by an earlier release?): %w", ErrDamaged, err)
	}
	if err := os.Remove(path); err != nil {
		return nil, nil, err
	}
	if err := syncDir(dir); err != nil {
		return nil, nil, err
	}
	found, err := liveTables(dir, opt.FS, opt.StallTimeout)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	if !bytes.Equal(found, parked) {
		return nil, nil, fmt.Errorf("%w: Pebble opens tables %s, the park left %s (a MANIFEST that lost records opens an earlier version of the database)",
			ErrDamaged, tableList(found), tableList(parked))
	}
	if err := os.Remove(filepath.Join(dir, tablesFile)); err != nil {
		return nil, nil, err
	}
	s = &Store{dir: dir, opt: opt, failedCh: make(chan struct{})}
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

// tableList is a tables file's lines as one line, for an error.
func tableList(b []byte) string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		out = append(out, "["+sc.Text()+"]")
	}
	if len(out) == 0 {
		return "none"
	}
	return fmt.Sprint(out)
}

// pebbleLogger routes Pebble's messages to slog, its errors at most once per
// errorEvery (a flush retried against a full disk logs one a few
// milliseconds). Pebble calls Fatalf on invariant violations and corruption
// and expects it not to return: it fails the store and parks the calling
// goroutine for good (a call's waiter returns the failure), so that one
// partition's store never takes the process down.
type pebbleLogger struct {
	l          *slog.Logger
	fatal      func(error) // fails the store
	mu         sync.Mutex
	lastError  time.Time
	suppressed int
}

// errorEvery is the least time between two of Pebble's errors in the log.
const errorEvery = 10 * time.Second

func (p *pebbleLogger) Infof(format string, args ...any) { p.l.Debug(fmt.Sprintf(format, args...)) }

func (p *pebbleLogger) Errorf(format string, args ...any) {
	p.mu.Lock()
	now := time.Now()
	if now.Sub(p.lastError) < errorEvery {
		p.suppressed++
		p.mu.Unlock()
		return
	}
	n := p.suppressed
	p.lastError, p.suppressed = now, 0
	p.mu.Unlock()
	p.l.Error(fmt.Sprintf(format, args...), "suppressed_since_last", n)
}

func (p *pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg)
	p.fatal(errors.New("pebble: " + msg))
	select {} // Pebble's goroutine ends here, parked; the store is failed
}
