// Package checkpoint stores driftstream's per-key state so that a crash,
// restart or rebalance loses nothing and replays deterministically
// (DESIGN.md §4). A checkpoint of a partition is a set of key records — each
// the key's opaque state and the input offsets it has absorbed
// (applied_through) — followed by a marker record with the offset through
// which every dirty key was written. Records are versioned and CRC-checked; a
// corrupt record is reported and its key falls back to the previous good
// record, never silently reset. Stores (a local file log, a compacted Kafka
// changelog topic) implement Store.
package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/driftstream/driftstream/internal/wire"
)

// RecordVersion is the format version written into every record.
const RecordVersion = 1

// ErrCorrupt reports a record whose checksum, version or layout is wrong.
var ErrCorrupt = errors.New("corrupt checkpoint record")

// NoOffset is the applied-through offset of an input a key has not read yet.
const NoOffset int64 = -1

// KeyRecord is one key's checkpointed state.
type KeyRecord struct {
	Partition int
	Key       string
	// AppliedThrough is, per input topic (0: events, 1: labels), the offset of
	// the last record the key absorbed, or NoOffset. During replay the key
	// skips records at or below it, so nothing is learned twice.
	AppliedThrough [2]int64
	// State is the key's opaque state (learner snapshot and pending queries).
	State []byte
}

// Marker closes a checkpoint of a partition: every key changed before input
// offset Through (inclusive) has a key record at or before the marker.
type Marker struct {
	Partition int
	Through   [2]int64
}

const (
	kindKey    byte = 'K'
	kindMarker byte = 'M'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frame lays out a record: version, kind, CRC-32C of the body, body.
func frame(kind byte, body []byte) []byte {
	out := make([]byte, 0, 6+len(body))
	out = append(out, RecordVersion, kind)
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(body, castagnoli))
	return append(out, body...)
}

// EncodeKey serializes a key record.
func EncodeKey(r KeyRecord) []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(r.Partition))
	b = binary.AppendUvarint(b, uint64(len(r.Key)))
	b = append(b, r.Key...)
	for _, o := range r.AppliedThrough {
		b = binary.AppendVarint(b, o)
	}
	b = binary.AppendUvarint(b, uint64(len(r.State)))
	b = append(b, r.State...)
	return frame(kindKey, b)
}

// EncodeMarker serializes a marker.
func EncodeMarker(m Marker) []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(m.Partition))
	for _, o := range m.Through {
		b = binary.AppendVarint(b, o)
	}
	return frame(kindMarker, b)
}

// Decode parses one record: exactly one of the results is non-nil on success.
func Decode(data []byte) (*KeyRecord, *Marker, error) {
	if len(data) < 6 {
		return nil, nil, fmt.Errorf("%d bytes: %w", len(data), ErrCorrupt)
	}
	if data[0] != RecordVersion {
		return nil, nil, fmt.Errorf("version %d, this build reads %d: %w", data[0], RecordVersion, ErrCorrupt)
	}
	body := data[6:]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(data[2:6]); got != want {
		return nil, nil, fmt.Errorf("CRC %08x, record says %08x: %w", got, want, ErrCorrupt)
	}
	r := wire.NewReader(body, ErrCorrupt)
	switch data[1] {
	case kindKey:
		k := KeyRecord{Partition: int(r.Uvarint())}
		k.Key = string(r.Bytes())
		for i := range k.AppliedThrough {
			k.AppliedThrough[i] = r.Varint()
		}
		k.State = r.Bytes()
		return &k, nil, r.Done()
	case kindMarker:
		m := Marker{Partition: int(r.Uvarint())}
		for i := range m.Through {
			m.Through[i] = r.Varint()
		}
		return nil, &m, r.Done()
	}
	return nil, nil, fmt.Errorf("unknown record kind %q: %w", data[1], ErrCorrupt)
}
