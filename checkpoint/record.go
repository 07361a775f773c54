// Package checkpoint stores driftstream's per-key state so that a crash,
// restart or rebalance loses nothing and replays deterministically
// (docs/spec/DESIGN.md §4). A checkpoint of a partition is a set of key records — each
// the key's opaque state and the input offsets it has absorbed
// (applied_through) — followed by a marker record with the offset through
// which every dirty key was written. Records are versioned and CRC-checked; a
// corrupt record is reported and its key falls back to the previous good
// record, never silently reset. A checkpoint counts only once its marker is
// in: a key record is read only when an accepted marker of its writer
// follows it, and the records of a torn checkpoint (a writer stopped between
// them and the marker) are set aside (torn.go). Stores (a local file log, a
// compacted Kafka changelog topic) implement Store.
//
// # Fencing
//
// A member that takes a partition reads the partition's log, picks an epoch
// above every epoch in it (NextEpoch), and writes an ownership record with that
// epoch (Store.Claim) before its first checkpoint. Every key record and marker
// carries its writer's epoch. Reading the log in order, the current epoch is
// the highest ownership epoch seen so far; a key record or marker whose epoch
// is below the current epoch was written by a former owner after a newer one
// had claimed the partition — a zombie that froze past its session timeout and
// woke up — and is fenced:
//
//   - a fenced marker is ignored;
//   - a fenced key record is ignored when the key already has an accepted
//     record; otherwise (compaction may have removed the accepted one, since
//     both share the record key) it is kept as the key's state but reported in
//     Snapshot.Corrupt, so that replay starts no later than its
//     applied_through + 1. A former owner's state is the deterministic state
//     of the key at its applied_through, so this replay is exact; the next
//     checkpoint rewrites the key under the new epoch.
//
// A former owner that wakes up can therefore repeat outputs (at-least-once
// output) but never change restored state. Ownership records are kept under
// one record key per epoch, so compaction never removes the evidence (one
// small record per takeover).
//
// The claim follows the read, so records can land between them: a former
// owner's last checkpoint, another member's claim. A later reader takes
// them (they precede the claim), so the claimer must hold them too: its
// state is the log's as of its claim. When anything came between (the
// claim is not at Snapshot.End), the claimer reads the log again up to
// and including its claim (LoadUntil); a kept state catches up to its claim
// (Resume, LoadRange). pipeline's claimed.go has the rule and its reasons.
package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/driftstream/driftstream/internal/wire"
)

// The records of a checkpoint log, each framed as version (1 byte), kind
// (1 byte: 'K' key, 'M' marker, 'O' ownership), CRC-32C (Castagnoli, big
// endian) of the body, body. FormatVersion is the version of every kind; a
// record of another version is refused as corrupt (CHANGELOG.md: the
// formats before the first release are not read).
//
//	key record:  uvarint partition, uvarint epoch, uvarint len + key,
//	             varint applied_through[events], varint
//	             applied_through[labels] (−1: none), uvarint len + state
//	marker:      uvarint partition, uvarint epoch, varint through[events],
//	             varint through[labels], uvarint reread, peers
//	             (AppendPeers; 0 for none), digest (8 bytes, little endian)
//	ownership:   uvarint partition, uvarint epoch, uvarint len + owner
const FormatVersion = 1

// maxPeers bounds the partitions a decoded marker names.
const maxPeers = 1 << 16

// ErrCorrupt reports a record whose checksum, version or layout is wrong.
var ErrCorrupt = errors.New("corrupt checkpoint record")

// ErrFenced reports a record written by a former owner after a newer owner
// had claimed the partition.
var ErrFenced = errors.New("written by a former owner after a newer owner claimed the partition")

// NoOffset is the applied-through offset of an input a key has not read yet.
const NoOffset int64 = -1

// Epoch orders the owners of a partition: a sequence number in the high 32
// bits (one more than the highest in the log when the partition is taken)
// and the consumer-group generation in the low 32 bits, which breaks the tie
// between two members that read the same log before either claimed.
type Epoch uint64

// NextEpoch is the epoch a new owner claims after reading a log whose highest
// epoch is seen, in consumer-group generation gen (0 outside a group).
func NextEpoch(seen Epoch, gen int32) Epoch {
	return Epoch((uint64(seen)>>32+1)<<32 | uint64(uint32(gen)))
}

func (e Epoch) String() string { return fmt.Sprintf("%d/gen%d", uint64(e)>>32, uint32(e)) }

// KeyRecord is one key's checkpointed state.
type KeyRecord struct {
	Partition int
	Key       string
	// Epoch is the writer's ownership epoch.
	Epoch Epoch
	// AppliedThrough is, per input topic (0: events, 1: labels), the offset of
	// the last record the key absorbed, or NoOffset. During replay the key
	// skips records at or below it, so nothing is learned twice.
	AppliedThrough [2]int64
	// State is the key's opaque state (learner snapshot and pending queries).
	// Empty means the key holds no state: such a record supersedes an
	// unreadable one of a key that the replay did not rebuild.
	State []byte
}

// Marker closes a checkpoint of a partition: every key changed before input
// offset Through (inclusive) has a key record at or before the marker.
type Marker struct {
	Partition int
	Epoch     Epoch
	Through   [2]int64
	// Reread counts the events-topic records before Through[0] + 1 that a
	// restore reads again: from the oldest event awaiting its label whose
	// input the key records leave out (the events topic gives it back), so
	// that the keys re-read those inputs as they skip their events. 0: none.
	Reread int64
	// Peers is, with a shared part across partitions, the last offset of
	// each other partition's input topics processed (indexed by partition,
	// then by input topic as Through; NoOffset for none): where their
	// reading resumes.
	Peers [][2]int64
	// Digest is the partition's state as of the marker in 64 bits: the sum
	// (mod 2⁶⁴) of KeyRecord.Digest over the latest record of every key
	// (digest.go). A restore recomputes it over what it loaded.
	Digest uint64
}

// noPeer is a partition of Marker.Peers with no offset.
var noPeer = [2]int64{NoOffset, NoOffset}

// RereadFrom is the events-topic offset from which a restore from m reads
// the events topic again for the awaited inputs the key records leave out
// (Through[0] + 1 − Reread), NoOffset when there are none or m is nil.
func (m *Marker) RereadFrom() int64 {
	if m == nil || m.Reread == 0 {
		return NoOffset
	}
	return m.Through[0] + 1 - m.Reread
}

// Ownership is written by a member when it takes a partition, before its
// first checkpoint; records of older epochs written after it are fenced.
type Ownership struct {
	Partition int
	Epoch     Epoch
	// Owner names the writer (consumer-group member, host) for diagnostics.
	Owner string
}

// Record is one decoded record: exactly one field is set.
type Record struct {
	Key    *KeyRecord
	Marker *Marker
	Owner  *Ownership
}

const (
	kindKey    byte = 'K'
	kindMarker byte = 'M'
	kindOwner  byte = 'O'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A record is framed as version, kind, CRC-32C of the body, body. The
// body is written in place after a 6-byte header that frame fills in.

// header appends a record's header, its CRC left for frame.
func header(b []byte, kind byte) []byte {
	return append(b, FormatVersion, kind, 0, 0, 0, 0)
}

// frame fills in the CRC of the record that starts at b[start:].
func frame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start+2:], crc32.Checksum(b[start+6:], castagnoli))
	return b
}

// EncodeKey serializes a key record.
func EncodeKey(r KeyRecord) []byte {
	return AppendKey(make([]byte, 0, 38+len(r.Key)+len(r.State)), r)
}

// AppendKey appends r's serialization (EncodeKey) to b: encoding into a
// reused buffer costs no allocation.
func AppendKey(b []byte, r KeyRecord) []byte {
	start := len(b)
	b = header(b, kindKey)
	b = binary.AppendUvarint(b, uint64(r.Partition))
	b = binary.AppendUvarint(b, uint64(r.Epoch))
	b = wire.AppendString(b, r.Key)
	for _, o := range r.AppliedThrough {
		b = binary.AppendVarint(b, o)
	}
	b = wire.AppendBytes(b, r.State)
	return frame(b, start)
}

// EncodeMarker serializes a marker.
func EncodeMarker(m Marker) []byte {
	b := header(nil, kindMarker)
	b = binary.AppendUvarint(b, uint64(m.Partition))
	b = binary.AppendUvarint(b, uint64(m.Epoch))
	for _, o := range m.Through {
		b = binary.AppendVarint(b, o)
	}
	b = binary.AppendUvarint(b, uint64(m.Reread))
	b = AppendPeers(b, m.Peers)
	b = binary.LittleEndian.AppendUint64(b, m.Digest)
	return frame(b, 0)
}

// AppendPeers appends peers — per partition, the last offset of each
// input topic (NoOffset: none) — in the layout of a marker's
// Peers, which key states and park manifests use too: uvarint N, then N ×
// (uvarint partition, varint events-topic offset, varint labels-topic
// offset), by partition, for the partitions with an offset.
func AppendPeers(b []byte, peers [][2]int64) []byte {
	n := 0
	for _, t := range peers {
		if t != noPeer {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for p, t := range peers {
		if t != noPeer {
			b = binary.AppendUvarint(b, uint64(p))
			b = binary.AppendVarint(b, t[0])
			b = binary.AppendVarint(b, t[1])
		}
	}
	return b
}

// ReadPeers reads what AppendPeers wrote (nil for none), failing r on
// partitions out of order or beyond 65,535 and on offsets below NoOffset
// or a partition with none.
func ReadPeers(r *wire.Reader) [][2]int64 {
	n := r.Uvarint()
	if n > maxPeers {
		r.Fail("peer count")
		return nil
	}
	var peers [][2]int64
	last := -1
	for range n {
		p, t := r.Uvarint(), [2]int64{r.Varint(), r.Varint()}
		if r.Err != nil || p >= maxPeers || int(p) <= last || t[0] < NoOffset || t[1] < NoOffset || t == noPeer {
			r.Fail("peer offset")
			return nil
		}
		for len(peers) <= int(p) {
			peers = append(peers, noPeer)
		}
		peers[p] = t
		last = int(p)
	}
	return peers
}

// EncodeOwnership serializes an ownership record.
func EncodeOwnership(o Ownership) []byte {
	b := header(nil, kindOwner)
	b = binary.AppendUvarint(b, uint64(o.Partition))
	b = binary.AppendUvarint(b, uint64(o.Epoch))
	b = wire.AppendString(b, o.Owner)
	return frame(b, 0)
}

// Decode parses one record. The record shares no memory with data.
func Decode(data []byte) (Record, error) { return decode(data, false) }

// DecodeOwned is Decode for a caller that hands data over: a key record's
// State is a slice of data rather than a copy, so a record read into a
// buffer of its own is copied once, not twice.
func DecodeOwned(data []byte) (Record, error) { return decode(data, true) }

// decode is Decode; with owned, the caller hands data over, and a key
// record's State is a slice of it rather than a copy (a restore reads
// every record's state once, from a buffer of its own).
func decode(data []byte, owned bool) (Record, error) {
	if len(data) < 6 {
		return Record{}, fmt.Errorf("%d bytes: %w", len(data), ErrCorrupt)
	}
	if data[0] != FormatVersion {
		return Record{}, fmt.Errorf("version %d of a record of kind %q, this build reads version %d only: %w", data[0], data[1], FormatVersion, ErrCorrupt)
	}
	body := data[6:]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(data[2:6]); got != want {
		return Record{}, fmt.Errorf("CRC %08x, record says %08x: %w", got, want, ErrCorrupt)
	}
	r := wire.NewReader(body, ErrCorrupt)
	epoch := func() Epoch { return Epoch(r.Uvarint()) }
	switch data[1] {
	case kindKey:
		k := KeyRecord{Partition: int(r.Uvarint())}
		k.Epoch = epoch()
		k.Key = string(r.View())
		for i := range k.AppliedThrough {
			k.AppliedThrough[i] = r.Varint()
		}
		if owned {
			k.State = r.View()
		} else {
			k.State = r.Bytes()
		}
		return Record{Key: &k}, r.Done()
	case kindMarker:
		m := Marker{Partition: int(r.Uvarint())}
		m.Epoch = epoch()
		for i := range m.Through {
			m.Through[i] = r.Varint()
		}
		if re := r.Uvarint(); re > uint64(max(m.Through[0]+1, 0)) {
			r.Fail("reread count")
		} else {
			m.Reread = int64(re)
		}
		m.Peers = ReadPeers(r)
		m.Digest = r.Uint64()
		return Record{Marker: &m}, r.Done()
	case kindOwner:
		o := Ownership{Partition: int(r.Uvarint())}
		o.Epoch = epoch()
		o.Owner = string(r.View())
		return Record{Owner: &o}, r.Done()
	}
	return Record{}, fmt.Errorf("unknown record kind %q: %w", data[1], ErrCorrupt)
}
