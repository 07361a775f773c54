package checkpoint

import (
	"context"
	"fmt"
)

// Store persists checkpoints. Implementations: FileStore (single node,
// backtests) and a compacted Kafka changelog topic (production).
type Store interface {
	// Write appends one checkpoint of a partition — key records, then the
	// marker — and returns once it is durable.
	Write(ctx context.Context, keys []KeyRecord, m Marker) error
	// Load returns what the store holds for a partition.
	Load(ctx context.Context, partition int) (Snapshot, error)
	// Close releases the store.
	Close() error
}

// Corruption is a record that could not be read. Key is empty when the
// record's key itself was unreadable.
type Corruption struct {
	Key string
	Err error
}

func (c Corruption) Error() string {
	if c.Key == "" {
		return fmt.Sprintf("record of an unknown key: %v", c.Err)
	}
	return fmt.Sprintf("record of key %q: %v", c.Key, c.Err)
}

// Snapshot is a partition's checkpointed state: the latest good record per
// key, the latest marker (nil before the first checkpoint) and the records
// that could not be read and were not superseded by a later good record of
// the same key.
type Snapshot struct {
	Keys    map[string]KeyRecord
	Marker  *Marker
	Corrupt []Corruption
}

// put records a good key record; it supersedes earlier corrupt records of the
// same key, which then no longer hold replay back.
func (s *Snapshot) put(rec KeyRecord) {
	s.Keys[rec.Key] = rec
	kept := s.Corrupt[:0]
	for _, c := range s.Corrupt {
		if c.Key != rec.Key {
			kept = append(kept, c)
		}
	}
	s.Corrupt = kept
}

// ReplayFrom is the input offset, per input topic, at which replay must
// start so that every key ends bit-identical to an uninterrupted run. Keys
// skip records at or below their AppliedThrough, so starting earlier is
// always safe; it costs only time. Normally it is the marker's Through + 1.
// A corrupt record of a known key lowers it to that key's previous good
// AppliedThrough + 1 (0 when the key has no good record); a corrupt record of
// an unknown key forces replay from the start (0: the earliest retained offset).
func (s Snapshot) ReplayFrom() [2]int64 {
	from := [2]int64{0, 0}
	if s.Marker != nil {
		from = [2]int64{s.Marker.Through[0] + 1, s.Marker.Through[1] + 1}
	}
	for _, c := range s.Corrupt {
		prev, ok := s.Keys[c.Key]
		for i := range from {
			switch {
			case c.Key == "" || !ok:
				from[i] = 0
			default:
				from[i] = min(from[i], prev.AppliedThrough[i]+1)
			}
		}
	}
	return from
}
