package checkpoint

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// A restore proves itself: every marker carries the digest of the
// partition's whole state as of that marker — the sum, modulo 2⁶⁴, of
// KeyRecord.Digest over the latest record of every key, the population's
// shared part and any partition-wide part included (they are key records)
// — and a restore recomputes it over the records it loaded. The sum is
// order-independent, and a writer keeps it up to date at each checkpoint by
// adding the digest of each record it writes and subtracting that of the
// record it supersedes (pipeline keeps one per key). A record missing,
// one more, or another one (a torn checkpoint's, a zombie's, one the cleaner
// should not have left) changes it: a mismatch is never silent (pipeline's
// restore rebuilds the partition from its inputs instead).

// Digest is the record's contribution to a marker's Digest: a 64-bit
// xxHash of its key, applied offsets and state; 0 for a record of a key
// holding nothing (no state), which counts as no record. The writer's epoch
// is left out, so a key written again unchanged keeps its digest.
func (r *KeyRecord) Digest() uint64 {
	if len(r.State) == 0 {
		return 0
	}
	var head [binary.MaxVarintLen64 + 16]byte
	b := binary.AppendUvarint(head[:0], uint64(len(r.Key)))
	h := xxhash.New()
	h.Write(b)
	h.WriteString(r.Key)
	b = binary.LittleEndian.AppendUint64(head[:0], uint64(r.AppliedThrough[0]))
	b = binary.LittleEndian.AppendUint64(b, uint64(r.AppliedThrough[1]))
	h.Write(b)
	h.Write(r.State)
	return h.Sum64()
}

// KeysDigest is the digest of the key records a snapshot collected in
// Keys (Load without a sink): what its marker's Digest must be when the
// snapshot holds the partition's state as of the marker.
func (s *Snapshot) KeysDigest() uint64 {
	var d uint64
	for _, rec := range s.Keys {
		d += rec.Digest()
	}
	return d
}
