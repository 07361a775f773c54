package pipeline

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/internal/wire"
)

// ParkingKeyStore is a KeyStore that can outlive its process on a
// persistent volume (keystore.Store): Kept.Park leaves it there, and Unpark
// builds the partition's kept state over it again in the next process.
type ParkingKeyStore interface {
	KeyStore
	// Park commits the staged records, leaves the store's files in dir and
	// writes manifest there as the last step. The store is closed whatever
	// the outcome.
	Park(dir string, manifest []byte) error
}

// ErrNotParked reports a manifest that does not describe a parked state
// this worker can resume: another partition, changelog or configuration, a
// format from another release, or damaged bytes. The state is rebuilt from
// the changelog instead.
var ErrNotParked = errors.New("no usable parked state")

// parkMagic opens every manifest; parkVersion is its format (encode), and
// that of the parked key store's values (keycache.go).
const (
	parkMagic   = "driftstream-parked\x00"
	parkVersion = 1
)

// Park leaves the kept state on disk for the partition's next owner in a
// later process of this member (a pod restarted with the same persistent
// volume): every key held in memory whose record the key store lacks is
// written there, and the store is parked in dir with a manifest of what
// resuming it needs — the changelog position after the state's last
// checkpoint, its epoch and offsets, its key count, and a fingerprint of
// the configuration its records decode under. scope names the changelog
// (Unpark refuses another). The kept state, its key store included, cannot
// be used afterwards, whatever the outcome.
//
// Parking is what Kept is across a rebalance, carried across a restart:
// the next Runner resumes it only if its own claim lands right after the
// manifest's position, that is, only if nothing was written to the
// partition's changelog in between.
func (k *Kept) Park(dir, scope string) error {
	w := k.w
	if w.cache == nil {
		return fmt.Errorf("park partition %d: the state has no key store", w.partition)
	}
	ps, ok := w.cache.store.(ParkingKeyStore)
	if !ok {
		w.Close()
		return fmt.Errorf("park partition %d: the key store %T cannot be parked", w.partition, w.cache.store)
	}
	if len(w.dirty) > 0 { // a Kept comes from a clean stop: never
		w.Close()
		return fmt.Errorf("park partition %d: %d keys changed since the last checkpoint", w.partition, len(w.dirty))
	}
	for key, ks := range w.keys {
		if !ks.Mark.Unstored {
			continue
		}
		state, err := w.model.AppendState(w.stateBuf[:0], ks) // set copies it
		if err == nil {
			w.stateBuf = state
			err = w.cache.set(&checkpoint.KeyRecord{Partition: w.partition, Key: key, Epoch: w.epoch, AppliedThrough: ks.Applied, State: state}, ks.Mark.Digest)
		}
		if err != nil {
			w.Close()
			return fmt.Errorf("park partition %d: key %q: %w", w.partition, key, err)
		}
	}
	fp, err := w.stateFingerprint()
	if err != nil {
		w.Close()
		return fmt.Errorf("park partition %d: %w", w.partition, err)
	}
	m := parkManifest{partition: w.partition, end: k.end, epoch: k.epoch, through: w.through, reread: w.rereadCount(), keys: w.cache.count, fingerprint: fp, scope: scope, digest: w.digest, peers: w.peers}
	if err := ps.Park(dir, m.encode()); err != nil {
		return fmt.Errorf("park partition %d: %w", w.partition, err)
	}
	w.keys = nil
	return nil
}

// Unpark returns the kept state that Park left with manifest, over store
// (the parked key store, reopened), for a Runner to resume
// (RunnerConfig.Kept) with cacheKeys keys in memory. It takes store: on
// error it closes it, and the error wraps ErrNotParked when the manifest
// is not one of partition's under cfg and scope.
func Unpark(cfg Config, partition int, store KeyStore, cacheKeys int, manifest []byte, scope string) (*Kept, error) {
	k, err := unpark(cfg, partition, store, cacheKeys, manifest, scope)
	if err != nil {
		if cerr := store.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, fmt.Errorf("unpark partition %d: %w", partition, err)
	}
	return k, nil
}

func unpark(cfg Config, partition int, store KeyStore, cacheKeys int, manifest []byte, scope string) (*Kept, error) {
	m, err := decodeManifest(manifest)
	if err != nil {
		return nil, err
	}
	w, err := NewWorker(cfg, partition)
	if err != nil {
		return nil, err
	}
	fp, err := w.stateFingerprint()
	if err != nil {
		return nil, err
	}
	switch {
	case m.partition != partition:
		return nil, fmt.Errorf("parked for partition %d: %w", m.partition, ErrNotParked)
	case m.scope != scope:
		return nil, fmt.Errorf("parked for changelog %q, not %q: %w", m.scope, scope, ErrNotParked)
	case m.fingerprint != fp:
		return nil, fmt.Errorf("parked under another learner, drift-detector or standardization configuration (or release): %w", ErrNotParked)
	}
	if err := w.UseKeyStore(store, cacheKeys); err != nil {
		return nil, err
	}
	w.cache.count = m.keys
	w.through = m.through
	w.peers = m.peers
	w.epoch = m.epoch
	w.digest = m.digest
	if m.reread > 0 { // the awaited inputs' offsets are tracked again as the events topic is re-read
		w.startReread(m.through[EventsTopic]+1-m.reread, m.through[EventsTopic]+1, m.through[EventsTopic]+1)
	}
	return &Kept{w: w, end: m.end, epoch: m.epoch, parked: true}, nil
}

// stateFingerprint identifies what the worker's key records decode under
// (keyed.Model.StateFingerprint).
func (w *Worker) stateFingerprint() ([32]byte, error) { return w.model.StateFingerprint() }

// parkManifest is what Park records beside a parked key store.
type parkManifest struct {
	partition   int
	end         int64 // the changelog position after the state's last checkpoint
	epoch       checkpoint.Epoch
	through     [2]int64
	reread      int64 // the marker's Reread, were the state checkpointed now (version 2)
	keys        int
	fingerprint [32]byte
	scope       string
	digest      uint64 // the partition's digest as of the state's last checkpoint
	// peers is the worker's last offset of each other partition's input
	// topics (Worker.peers), as a marker writes them (checkpoint.AppendPeers).
	peers [][2]int64
}

// encode writes the manifest: magic, version, then varint partition,
// varint end, uvarint epoch, varint through ×2, uvarint reread, uvarint
// keys, 32-byte fingerprint, uvarint len + scope, digest (8 bytes, little
// endian), peers (checkpoint.AppendPeers), then CRC-32C (Castagnoli, little
// endian) of them all.
func (m *parkManifest) encode() []byte {
	b := append([]byte(parkMagic), parkVersion)
	b = binary.AppendVarint(b, int64(m.partition))
	b = binary.AppendVarint(b, m.end)
	b = binary.AppendUvarint(b, uint64(m.epoch))
	b = binary.AppendVarint(b, m.through[0])
	b = binary.AppendVarint(b, m.through[1])
	b = binary.AppendUvarint(b, uint64(m.reread))
	b = binary.AppendUvarint(b, uint64(m.keys))
	b = append(b, m.fingerprint[:]...)
	b = wire.AppendString(b, m.scope)
	b = binary.LittleEndian.AppendUint64(b, m.digest)
	b = checkpoint.AppendPeers(b, m.peers)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func decodeManifest(b []byte) (parkManifest, error) {
	var m parkManifest
	n := len(b) - 4
	if n < len(parkMagic)+1 || !bytes.HasPrefix(b, []byte(parkMagic)) || crc32.Checksum(b[:n], crcTable) != binary.LittleEndian.Uint32(b[n:]) {
		return m, fmt.Errorf("manifest of %d bytes: damaged or not a manifest: %w", len(b), ErrNotParked)
	}
	if v := b[len(parkMagic)]; v != parkVersion {
		return m, fmt.Errorf("manifest format %d (this release reads %d): %w", v, parkVersion, ErrNotParked)
	}
	r := wire.NewReader(b[len(parkMagic)+1:n], ErrNotParked)
	m.partition = int(r.Varint())
	m.end = r.Varint()
	m.epoch = checkpoint.Epoch(r.Uvarint())
	m.through = [2]int64{r.Varint(), r.Varint()}
	m.reread = int64(r.Uvarint())
	if r.Err == nil && (m.reread < 0 || m.reread > m.through[EventsTopic]+1) {
		r.Fail("reread count")
	}
	m.keys = int(r.Uvarint())
	if r.Err == nil && len(r.B) < len(m.fingerprint) {
		r.Fail("fingerprint")
	}
	if r.Err == nil {
		copy(m.fingerprint[:], r.B)
		r.B = r.B[len(m.fingerprint):]
	}
	m.scope = string(r.Bytes())
	m.digest = r.Uint64()
	m.peers = checkpoint.ReadPeers(r)
	if err := r.Done(); err != nil {
		return m, fmt.Errorf("manifest: %w", err)
	}
	return m, nil
}
