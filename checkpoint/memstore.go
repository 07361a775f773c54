package checkpoint

import (
	"context"
	"fmt"
	"sync"
)

// MemoryStore keeps checkpoints in memory, as the log a durable store would
// hold: backtests use it (nothing to persist) and tests inspect or damage it.
type MemoryStore struct {
	mu   sync.Mutex
	logs map[int][]Entry
}

// Entry is one stored record: its store key and encoded value.
type Entry struct {
	Key   string
	Value []byte
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore { return &MemoryStore{logs: map[int][]Entry{}} }

// Claim appends an ownership record.
func (s *MemoryStore) Claim(ctx context.Context, o Ownership) error {
	_, err := s.ClaimAt(ctx, o)
	return err
}

// ClaimAt is Claim, returning the ownership record's index in the log.
func (s *MemoryStore) ClaimAt(ctx context.Context, o Ownership) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs[o.Partition] = append(s.logs[o.Partition], Entry{ownerKey(o.Epoch), EncodeOwnership(o)})
	return int64(len(s.logs[o.Partition]) - 1), nil
}

// Write appends the key records and the marker.
func (s *MemoryStore) Write(ctx context.Context, keys []KeyRecord, m Marker) error {
	_, err := s.WriteAt(ctx, keys, m)
	return err
}

// WriteAt is Write, returning the log's length after the marker.
func (s *MemoryStore) WriteAt(ctx context.Context, keys []KeyRecord, m Marker) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var entries []Entry
	_, err := encodeCheckpoint(keys, m, func(b []byte, key string, rec []byte) []byte {
		entries = append(entries, Entry{key, rec})
		return b
	})
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs[m.Partition] = append(s.logs[m.Partition], entries...)
	return int64(len(s.logs[m.Partition])), nil
}

// Load replays the partition's log.
func (s *MemoryStore) Load(ctx context.Context, p int, sink KeySink) (Snapshot, error) {
	return s.LoadUntil(ctx, p, -1, sink)
}

// LoadUntil is Load reading the positions before to only (to < 0: all).
func (s *MemoryStore) LoadUntil(ctx context.Context, p int, to int64, sink KeySink) (Snapshot, error) {
	snap := newSnapshot(sink)
	if err := ctx.Err(); err != nil {
		return snap, err
	}
	log := s.Log(p)
	switch {
	case to > int64(len(log)):
		return snap, fmt.Errorf("load partition %d until position %d: the log ends at %d", p, to, len(log))
	case to >= 0:
		log = log[:to]
	}
	snap.reserve(len(log))
	for i, e := range log {
		snap.absorb(p, int64(i), []byte(e.Key), e.Value, false)
	}
	snap.End = int64(len(log))
	snap.end()
	return snap, nil
}

// LoadRange absorbs the records at positions [from, to) of partition p's
// log into snap, a snapshot from Resume.
func (s *MemoryStore) LoadRange(ctx context.Context, p int, from, to int64, snap *Snapshot) error {
	if err := checkRange(from, to, snap); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	log := s.Log(p)
	if to > int64(len(log)) {
		return fmt.Errorf("load the range [%d, %d) of partition %d: the log ends at %d", from, to, p, len(log))
	}
	for i, e := range log[from:to] {
		snap.absorb(p, from+int64(i), []byte(e.Key), e.Value, false)
	}
	snap.end()
	return nil
}

// Log returns a copy of a partition's log, for inspection.
func (s *MemoryStore) Log(p int) []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.logs[p]...)
}

// SetLog replaces a partition's log (tests use it to damage or compact it).
func (s *MemoryStore) SetLog(p int, log []Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs[p] = append([]Entry(nil), log...)
}

// Close releases nothing.
func (s *MemoryStore) Close() error { return nil }
