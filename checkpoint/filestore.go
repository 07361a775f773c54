package checkpoint

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// FileStore keeps one append-only log per partition in a directory. Each
// entry is the key in the clear (so that a corrupt record still names its
// key), then the record; both length-prefixed. When a log grows past
// CompactBytes it is rewritten, after a checkpoint, to the latest record per
// key plus the marker, through a temporary file and an atomic rename.
type FileStore struct {
	dir          string
	compactBytes int64
	mu           sync.Mutex
}

// NewFileStore opens (creating) a store in dir; compactBytes ≤ 0 means 64 MiB.
func NewFileStore(dir string, compactBytes int64) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint store %s: %w", dir, err)
	}
	if compactBytes <= 0 {
		compactBytes = 64 << 20
	}
	return &FileStore{dir: dir, compactBytes: compactBytes}, nil
}

func (s *FileStore) path(p int) string {
	return filepath.Join(s.dir, fmt.Sprintf("partition-%d.log", p))
}

func appendEntry(b []byte, key string, rec []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(rec)))
	return append(b, rec...)
}

// Write appends the key records and the marker and syncs the file.
func (s *FileStore) Write(ctx context.Context, keys []KeyRecord, m Marker) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var buf []byte
	for _, k := range keys {
		if k.Partition != m.Partition {
			return fmt.Errorf("checkpoint partition %d: key %q belongs to partition %d", m.Partition, k.Key, k.Partition)
		}
		buf = appendEntry(buf, k.Key, EncodeKey(k))
	}
	buf = appendEntry(buf, "", EncodeMarker(m))
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(s.path(m.Partition), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("checkpoint partition %d: %w", m.Partition, err)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint partition %d: %w", m.Partition, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint partition %d: sync: %w", m.Partition, err)
	}
	st, err := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("checkpoint partition %d: %w", m.Partition, err)
	}
	if st.Size() > s.compactBytes {
		return s.compact(ctx, m.Partition)
	}
	return nil
}

// compact rewrites a partition's log to its latest good records (caller holds mu).
func (s *FileStore) compact(ctx context.Context, p int) error {
	snap, err := s.load(ctx, p)
	if err != nil || len(snap.Corrupt) > 0 || snap.Marker == nil {
		return err // never compact away evidence of corruption
	}
	var buf []byte
	for _, k := range snap.Keys {
		buf = appendEntry(buf, k.Key, EncodeKey(k))
	}
	buf = appendEntry(buf, "", EncodeMarker(*snap.Marker))
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
func (s *FileStore) Load(ctx context.Context, p int) (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load(ctx, p)
}

func (s *FileStore) load(ctx context.Context, p int) (Snapshot, error) {
	snap := Snapshot{Keys: map[string]KeyRecord{}}
	f, err := os.Open(s.path(p))
	if errors.Is(err, os.ErrNotExist) {
		return snap, nil
	}
	if err != nil {
		return snap, fmt.Errorf("load partition %d: %w", p, err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return snap, err
			}
		}
		key, rec, err := readEntry(r)
		if errors.Is(err, io.EOF) {
			return snap, nil
		}
		if err != nil { // torn tail or garbled framing: nothing after it can be trusted
			snap.Corrupt = append(snap.Corrupt, Corruption{Key: key, Err: err})
			return snap, nil
		}
		k, m, err := Decode(rec)
		switch {
		case err != nil:
			snap.Corrupt = append(snap.Corrupt, Corruption{Key: key, Err: err})
		case m != nil:
			if m.Partition != p {
				snap.Corrupt = append(snap.Corrupt, Corruption{Err: fmt.Errorf("marker of partition %d in the log of %d: %w", m.Partition, p, ErrCorrupt)})
				continue
			}
			snap.Marker = m
		case k.Key != key || k.Partition != p:
			snap.Corrupt = append(snap.Corrupt, Corruption{Key: key, Err: fmt.Errorf("record of key %q, partition %d: %w", k.Key, k.Partition, ErrCorrupt)})
		default:
			snap.put(*k)
		}
	}
}

// maxEntry bounds one entry so that a garbled length cannot allocate wildly.
const maxEntry = 1 << 30

func readEntry(r *bufio.Reader) (string, []byte, error) {
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
