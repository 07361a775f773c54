package checkpoint

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/driftstream/driftstream/internal/wire"
)

// FileStore keeps one append-only log per partition in a directory. Each
// entry is the record's store key in the clear (so that a corrupt record
// still names its key), then the record; both length-prefixed. An unreadable
// tail (a torn write) ends the readable log: it is reported by Load and cut
// off before the next append. When a log grows past CompactBytes it is
// rewritten, after a checkpoint, to the current ownership record and the
// latest record per key plus the marker, through a temporary file and an
// atomic rename.
type FileStore struct {
	dir          string
	compactBytes int64
	mu           sync.Mutex
	checked      map[int]bool // partitions whose tail was verified by this process
}

// NewFileStore opens (creating) a store in dir; compactBytes ≤ 0 means 64 MiB.
func NewFileStore(dir string, compactBytes int64) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint store %s: %w", dir, err)
	}
	if compactBytes <= 0 {
		compactBytes = 64 << 20
	}
	return &FileStore{dir: dir, compactBytes: compactBytes, checked: map[int]bool{}}, nil
}

func (s *FileStore) path(p int) string {
	return filepath.Join(s.dir, fmt.Sprintf("partition-%d.log", p))
}

// appendEntry appends one log entry: key and record, each as "bytes"
// (package wire). readEntry reads it back from the file as a stream, so
// that a torn last entry is told from a corrupt one.
func appendEntry(b []byte, key string, rec []byte) []byte {
	return wire.AppendBytes(wire.AppendString(b, key), rec)
}

// Claim appends an ownership record and syncs the file.
func (s *FileStore) Claim(ctx context.Context, o Ownership) error {
	return s.append(ctx, o.Partition, appendEntry(nil, ownerKey(o.Epoch), EncodeOwnership(o)))
}

// Write appends the key records and the marker and syncs the file.
func (s *FileStore) Write(ctx context.Context, keys []KeyRecord, m Marker) error {
	buf, err := encodeCheckpoint(keys, m, appendEntry)
	if err != nil {
		return err
	}
	return s.append(ctx, m.Partition, buf)
}

// encodeCheckpoint checks that every key belongs to the marker's partition
// and lays the records out with add(buf, store key, record).
func encodeCheckpoint(keys []KeyRecord, m Marker, add func(b []byte, key string, rec []byte) []byte) ([]byte, error) {
	var buf []byte
	for _, k := range keys {
		if k.Partition != m.Partition {
			return nil, fmt.Errorf("checkpoint partition %d: key %q belongs to partition %d", m.Partition, k.Key, k.Partition)
		}
		if ReservedKey(k.Key) {
			return nil, fmt.Errorf("checkpoint partition %d: key %q uses the store's reserved prefix", m.Partition, k.Key)
		}
		buf = add(buf, k.Key, EncodeKey(k))
	}
	return add(buf, markerKey(m.Epoch), EncodeMarker(m)), nil
}

func (s *FileStore) append(ctx context.Context, p int, buf []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.checked[p] {
		// Cut an unreadable tail left by a torn write, or the new records
		// would sit behind it where no reader reaches them.
		_, good, err := s.load(ctx, p, nil)
		if err != nil {
			return err
		}
		if err := os.Truncate(s.path(p), good); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("checkpoint partition %d: cut the torn tail: %w", p, err)
		}
		s.checked[p] = true
	}
	f, err := os.OpenFile(s.path(p), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("checkpoint partition %d: %w", p, err)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint partition %d: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint partition %d: sync: %w", p, err)
	}
	st, err := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("checkpoint partition %d: %w", p, err)
	}
	if st.Size() > s.compactBytes {
		return s.compact(ctx, p)
	}
	return nil
}

// compact rewrites a partition's log to its accepted records (caller holds
// mu). It never compacts away evidence: a log with corrupt, fenced or
// ignored records is left as it is.
func (s *FileStore) compact(ctx context.Context, p int) error {
	snap, _, err := s.load(ctx, p, nil)
	if err != nil || len(snap.Corrupt) > 0 || len(snap.Ignored) > 0 || snap.Fenced > 0 || snap.Marker == nil {
		return err
	}
	// Every record is written under one epoch, the current owner's (or the
	// marker's, before any claim), and closed by the marker: the fencing
	// rule and the marker rule (torn.go) accept them all as they accepted
	// the records they stand for.
	e := snap.Marker.Epoch
	var buf []byte
	if snap.Owner != nil {
		e = snap.Owner.Epoch
		buf = appendEntry(buf, ownerKey(e), EncodeOwnership(*snap.Owner))
	}
	for _, key := range slices.Sorted(maps.Keys(snap.Keys)) {
		if k := *snap.Keys[key]; len(k.State) > 0 {
			k.Epoch = e
			buf = appendEntry(buf, k.Key, EncodeKey(k))
		}
	}
	m := *snap.Marker
	m.Epoch = e
	buf = appendEntry(buf, markerKey(e), EncodeMarker(m))
	tmp := s.path(p) + ".compact"
	if err := writeSynced(tmp, buf); err != nil {
		return fmt.Errorf("compact partition %d: %w", p, err)
	}
	if err := os.Rename(tmp, s.path(p)); err != nil {
		return fmt.Errorf("compact partition %d: %w", p, err)
	}
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Load reads a partition's log. A missing log is an empty snapshot.
func (s *FileStore) Load(ctx context.Context, p int, sink KeySink) (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, _, err := s.load(ctx, p, sink)
	return snap, err
}

// load reads the log and returns the snapshot and the length of its readable
// prefix.
func (s *FileStore) load(ctx context.Context, p int, sink KeySink) (Snapshot, int64, error) {
	snap := newSnapshot(sink)
	f, err := os.Open(s.path(p))
	if errors.Is(err, os.ErrNotExist) {
		return snap, 0, nil
	}
	if err != nil {
		return snap, 0, fmt.Errorf("load partition %d: %w", p, err)
	}
	defer f.Close()
	r := &countingReader{r: bufio.NewReader(f)}
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return snap, 0, err
			}
		}
		good := r.n
		key, rec, err := readEntry(r)
		if errors.Is(err, io.EOF) {
			snap.end()
			return snap, good, nil
		}
		if err != nil { // torn tail or garbled framing: nothing after it can be trusted
			snap.Ignored = append(snap.Ignored, Corruption{Key: key, Err: fmt.Errorf("unreadable log from byte %d on (cut before the next write): %w", good, err)})
			snap.end()
			return snap, good, nil
		}
		snap.absorb(p, good, []byte(key), rec, true)
	}
}

// countingReader counts the bytes read, to find where a torn tail starts.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// maxEntry bounds one entry so that a garbled length cannot allocate wildly.
const maxEntry = 1 << 30

func readEntry(r *countingReader) (string, []byte, error) {
	kl, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return "", nil, io.EOF
		}
		return "", nil, fmt.Errorf("entry header: %v: %w", err, ErrCorrupt)
	}
	if kl > maxEntry {
		return "", nil, fmt.Errorf("key length %d: %w", kl, ErrCorrupt)
	}
	key := make([]byte, kl)
	if _, err := io.ReadFull(r, key); err != nil {
		return "", nil, fmt.Errorf("torn entry (key): %w", ErrCorrupt)
	}
	rl, err := binary.ReadUvarint(r)
	if err != nil || rl > maxEntry {
		return string(key), nil, fmt.Errorf("torn entry (length): %w", ErrCorrupt)
	}
	rec := make([]byte, rl)
	if _, err := io.ReadFull(r, rec); err != nil {
		return string(key), nil, fmt.Errorf("torn entry (record): %w", ErrCorrupt)
	}
	return string(key), rec, nil
}

// Close releases nothing: every write opens, syncs and closes its file.
func (s *FileStore) Close() error { return nil }
