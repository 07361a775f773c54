package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Store persists checkpoints. Implementations: FileStore (single node,
// backtests), MemoryStore (backtests, tests) and KafkaStore (a compacted
// changelog topic, production). Errors are returned as they come; the
// caller (pipeline.Runner) decides what to retry.
type Store interface {
	// Claim writes an ownership record: from here on, records of older epochs
	// are fenced. It returns once the record is durable.
	Claim(ctx context.Context, o Ownership) error
	// Write appends one checkpoint of a partition — key records, then the
	// marker — and returns once it is durable.
	Write(ctx context.Context, keys []KeyRecord, m Marker) error
	// Load returns what the store holds for a partition. With a nil sink
	// the key records are collected in Snapshot.Keys; otherwise they are
	// handed to sink as they are read, in log order, and Snapshot.Keys
	// stays nil.
	Load(ctx context.Context, partition int, sink KeySink) (Snapshot, error)
	// Close releases the store.
	Close() error
}

// KeySink receives a partition's key records while a Store's Load reads
// them, in place of Snapshot.Keys: a restore builds each key as its record
// arrives and keeps no record longer than that, where collecting them first
// would hold the whole changelog (hundreds of MB for a million keys) beside
// the keys built from it. Load calls it from one goroutine at a time.
type KeySink interface {
	// Reserve says how many keys to expect at most (the log's length, capped),
	// so that the sink can size its map once.
	Reserve(n int)
	// Put makes rec the key's record, superseding any earlier one. The sink
	// may keep rec and the slices it holds.
	Put(rec *KeyRecord)
	// Has reports whether the key has a record, usable or not: the fencing
	// rule keeps a former owner's record only for a key that has none.
	Has(key string) bool
}

// ErrTailGone reports that a partition's log no longer holds the records
// after a position (retention or deleted records moved its start past it):
// the state at that position cannot be brought up to date from the log, and
// the partition needs a full Load.
var ErrTailGone = errors.New("the log no longer holds the records after the position")

// Resume starts the snapshot of a partition at a position of its log whose
// state the caller holds — a state it wrote itself up to there, under the
// ownership record owner and ending with the marker m — so that a store's
// LoadRange can absorb the records written after it (by other owners) under
// the fencing rule, as Load would have: the tail of the log instead of all of
// it. The key records go to sink, whose Has must answer for the keys the
// caller holds as well as those it is handed.
func Resume(sink KeySink, owner Ownership, m Marker) (*Snapshot, error) {
	switch {
	case sink == nil:
		return nil, errors.New("resume a snapshot: a key sink is required (it holds the keys from before the position)")
	case owner.Partition != m.Partition || m.Epoch > owner.Epoch:
		return nil, fmt.Errorf("resume a snapshot: owner %+v and marker %+v do not belong together", owner, m)
	}
	return &Snapshot{sink: sink, Owner: &owner, Marker: &m, MaxEpoch: owner.Epoch}, nil
}

// checkRange validates a LoadRange call: a resumed snapshot, and positions
// from ≤ to.
func checkRange(from, to int64, snap *Snapshot) error {
	switch {
	case snap == nil || snap.sink == nil || snap.Owner == nil:
		return errors.New("load a range: the snapshot must come from Resume")
	case from < 0 || from > to:
		return fmt.Errorf("load the range [%d, %d): not a range of positions", from, to)
	}
	return nil
}

// Corruption is a record that could not be used. Key is empty when the
// record's key itself was unreadable or the record was not a key record.
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

func (c Corruption) Unwrap() error { return c.Err }

// Snapshot is a partition's checkpointed state, read in log order under the
// fencing rule of the package doc.
type Snapshot struct {
	// Keys is the latest accepted record per key (a fenced record only when
	// the key has no accepted one); nil when Load was given a KeySink.
	Keys map[string]*KeyRecord
	// Marker is the latest accepted marker (nil before the first checkpoint).
	Marker *Marker
	// Corrupt lists the key records that could not be read, and the fenced
	// records standing in for a key, not superseded by a later accepted
	// record of the same key: they hold the replay start back (ReplayFrom).
	Corrupt []Corruption
	// Ignored lists unusable records that do not affect replay: corrupt
	// markers and ownership records (an earlier marker, or none, is always a
	// safe replay start), and an unreadable file-store tail.
	Ignored []Corruption
	// Owner is the current ownership record (nil when none was written).
	Owner *Ownership
	// MaxEpoch is the highest epoch of any record read: a new owner claims
	// NextEpoch(MaxEpoch, generation).
	MaxEpoch Epoch
	// Fenced counts records ignored or demoted by the fencing rule;
	// FencedKeys are the keys of the fenced key records ignored because the
	// key has an accepted record (a key may be listed more than once). Such
	// a record follows the accepted one, so once both are in a cleaned
	// segment the cleaner removes the accepted one: the reader writes those
	// keys again.
	Fenced     int
	FencedKeys []string
	// Read counts the records read: what a restore costs, the changelog's
	// length once compacted.
	Read int
	// Unowned counts the markers and key records of the ownership protocol
	// (epoch > 0) read before any ownership record: a log every owner
	// starts with a claim never has one, so a log that has them started
	// over (the topic was deleted and recreated) and lacks what came before.
	Unowned int
	// Torn lists the checkpoints whose key records were read without their
	// marker (torn.go): their records were set aside.
	Torn []TornCheckpoint
	// End is the store position after the last one read by a positioned
	// store's Load (KafkaStore, MemoryStore): an ownership record claimed
	// right there follows everything the snapshot holds.
	End int64
	// sink receives the key records when the caller of Load gave one.
	sink KeySink
	// win is the open window: the key records since the last accepted
	// marker of their epoch.
	win window
}

// newSnapshot starts a snapshot that collects key records in Keys, or hands
// them to sink.
func newSnapshot(sink KeySink) Snapshot {
	if sink != nil {
		return Snapshot{sink: sink}
	}
	return Snapshot{Keys: map[string]*KeyRecord{}}
}

// reserve sizes the key map, or the sink's, for about n keys: growing a map
// of a million keys rehashes it twenty times.
func (s *Snapshot) reserve(n int) {
	n = min(n, maxKeyHint)
	switch {
	case s.sink != nil:
		s.sink.Reserve(n)
	case len(s.Keys) == 0:
		s.Keys = make(map[string]*KeyRecord, n)
	}
}

// maxKeyHint caps the key map's initial size (about 40 MB of map), for logs
// that are not compacted down to about one record per key.
const maxKeyHint = 1 << 20

// has reports whether the key has a record (one held back in the open
// window included).
func (s *Snapshot) has(key string) bool {
	if _, ok := s.win.at[key]; ok {
		return true
	}
	if s.sink != nil {
		return s.sink.Has(key)
	}
	_, ok := s.Keys[key]
	return ok
}

// keep makes rec the key's record.
func (s *Snapshot) keep(rec *KeyRecord) {
	if s.sink != nil {
		s.sink.Put(rec)
		return
	}
	s.Keys[rec.Key] = rec
}

// Reserved record keys of markers and ownership records: one key per epoch
// for each, so that compaction, which keeps the latest record per key, never
// lets a former owner's late marker or claim replace the current owner's.
// Entity keys that start with reservedPrefix are refused by the pipeline.
const (
	reservedPrefix  = "\x00driftstream-"
	markerKeyPrefix = reservedPrefix + "marker-"
	ownerKeyPrefix  = reservedPrefix + "owner-"
)

// ReservedKey reports whether an entity key collides with the store's own
// record keys (such keys must be refused before they reach a store).
func ReservedKey(key string) bool { return strings.HasPrefix(key, reservedPrefix) }

// ownerKey is the record key of an epoch's ownership record: one per epoch,
// so that compaction keeps every claim.
func ownerKey(e Epoch) string { return ownerKeyPrefix + strconv.FormatUint(uint64(e), 16) }

// markerKey is the record key of an epoch's markers.
func markerKey(e Epoch) string { return markerKeyPrefix + strconv.FormatUint(uint64(e), 16) }

// reserved reports whether a store key belongs to a marker or ownership
// record (or is the file store's legacy marker key).
func reserved(key string) bool { return key == "" || ReservedKey(key) }

// absorb adds one stored record (its store-level key and value, in log order,
// at position pos) to the snapshot of partition p, applying the fencing rule
// and the marker rule (torn.go). With owned, the caller hands value over, and
// the snapshot may keep slices of it.
func (s *Snapshot) absorb(p int, pos int64, key []byte, value []byte, owned bool) {
	s.Read++
	rec, err := decode(value, owned)
	if err != nil {
		key := string(key)
		if reserved(key) {
			s.Ignored = append(s.Ignored, Corruption{Err: fmt.Errorf("%q: %w", key, err)})
		} else {
			s.Corrupt = append(s.Corrupt, Corruption{Key: key, Err: err})
		}
		return
	}
	mismatch := func(what string, part int) {
		key := string(key)
		err := fmt.Errorf("%s of partition %d stored under key %q in partition %d: %w", what, part, key, p, ErrCorrupt)
		if reserved(key) {
			s.Ignored = append(s.Ignored, Corruption{Err: err})
		} else {
			s.Corrupt = append(s.Corrupt, Corruption{Key: key, Err: err})
		}
	}
	current := Epoch(0)
	if s.Owner != nil {
		current = s.Owner.Epoch
	} else if (rec.Marker != nil && rec.Marker.Epoch > 0) || (rec.Key != nil && rec.Key.Epoch > 0) {
		s.Unowned++
	}
	switch {
	case rec.Owner != nil:
		o := rec.Owner
		if o.Partition != p || string(key) != ownerKey(o.Epoch) {
			mismatch("ownership record", o.Partition)
			return
		}
		s.MaxEpoch = max(s.MaxEpoch, o.Epoch)
		if s.Owner != nil && o.Epoch <= current {
			s.Fenced++ // a stale claim, written after a newer one
			return
		}
		s.tear() // the former owner's checkpoint in flight never got its marker
		s.Owner = o
	case rec.Marker != nil:
		m := rec.Marker
		if m.Partition != p || string(key) != markerKey(m.Epoch) {
			mismatch("marker", m.Partition)
			return
		}
		s.MaxEpoch = max(s.MaxEpoch, m.Epoch)
		if m.Epoch < current {
			s.Fenced++
			return
		}
		s.commit(m.Epoch)
		s.Marker = m
	default:
		k := rec.Key
		if k.Partition != p || k.Key != string(key) {
			mismatch(fmt.Sprintf("record of key %q", k.Key), k.Partition)
			return
		}
		s.MaxEpoch = max(s.MaxEpoch, k.Epoch)
		if k.Epoch < current {
			s.Fenced++
			if s.has(k.Key) {
				s.FencedKeys = append(s.FencedKeys, k.Key)
				return // the key has an accepted record: keep it
			}
			s.keep(k)
			s.Corrupt = append(s.Corrupt, Corruption{Key: k.Key, Err: fmt.Errorf("epoch %v < %v: %w", k.Epoch, current, ErrFenced)})
			return
		}
		s.hold(pos, k)
	}
}

// put records an accepted key record; it supersedes earlier corrupt or
// fenced records of the same key, which then no longer hold replay back.
func (s *Snapshot) put(rec *KeyRecord) {
	s.keep(rec)
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
// A corrupt or fenced record of a key lowers it to the AppliedThrough + 1 of
// the record the key falls back to (0 when it has none).
func (s Snapshot) ReplayFrom() [2]int64 {
	return s.ReplayFromKeys(func(key string) ([2]int64, bool) {
		rec, ok := s.Keys[key]
		if !ok {
			return [2]int64{}, false
		}
		return rec.AppliedThrough, true
	})
}

// ReplayFromKeys is ReplayFrom for a snapshot loaded into a KeySink: applied
// returns the AppliedThrough of the record a key fell back to, if it has one.
func (s Snapshot) ReplayFromKeys(applied func(key string) ([2]int64, bool)) [2]int64 {
	from := s.AbsorbFromKeys(applied)
	if r := s.Marker.RereadFrom(); r != NoOffset { // the awaited inputs the key records leave out
		from[0] = min(from[0], r)
	}
	return from
}

// AbsorbFromKeys is the input offset, per input topic, from which the keys
// must absorb records again: ReplayFromKeys without the records re-read
// for awaited inputs (Marker.Reread), which every key absorbed before.
func (s Snapshot) AbsorbFromKeys(applied func(key string) ([2]int64, bool)) [2]int64 {
	from := [2]int64{0, 0}
	if s.Marker != nil {
		from = [2]int64{s.Marker.Through[0] + 1, s.Marker.Through[1] + 1}
	}
	for _, c := range s.Corrupt {
		through, ok := applied(c.Key)
		for i := range from {
			switch {
			case c.Key == "" || !ok:
				from[i] = 0
			default:
				from[i] = min(from[i], through[i]+1)
			}
		}
	}
	return from
}
