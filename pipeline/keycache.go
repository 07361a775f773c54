package pipeline

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
)

// KeyStore holds the records of a worker's keys outside memory (package
// keystore keeps them in Pebble on local disk), for partitions whose keys
// do not all fit in memory. The worker's key map is then a cache over it:
// a key not in memory is read back from its record, and keys are evicted
// only when clean, that is, when their state equals their record here.
//
// The store is a cache of the changelog, not a second record of truth: a
// restore rebuilds it from the changelog (Reset, then a Set per key), and a
// checkpoint writes the records it takes here as well as to the changelog.
type KeyStore interface {
	// Get returns key's record (checkpoint.EncodeKey), false when there is
	// none. It sees every Set and Delete before it. The record is the
	// caller's.
	Get(key string) (record []byte, ok bool, err error)
	// Set stages key's record, replacing any earlier one. It copies record:
	// the worker encodes every record into one reused buffer.
	Set(key string, record []byte) error
	// Delete stages the removal of key's record.
	Delete(key string) error
	// Flush commits the staged writes.
	Flush() error
	// Reset drops every record.
	Reset() error
	// Close releases the store.
	Close() error
}

// keyCache is a worker's key store and the bound on the keys it holds in
// memory. A key not in memory has its latest state in the store; one in
// memory may have an older record there, or none (keyed.Mark.Unstored).
type keyCache struct {
	store KeyStore
	max   int // clean keys held in memory at most, after a checkpoint
	count int // keys held in memory or in the store
	buf   []byte
}

// A key store's value is the digest of the key's latest changelog record
// (8 bytes, little endian: what its next record replaces in the marker's
// digest), then the key's record (checkpoint.AppendKey), whose state is
// the key's whole state (keyed.Model.AppendState): it may differ from the
// changelog's record, which leaves out the inputs the events topic gives
// back.

// set writes rec to the store with digest, the digest of the key's latest
// changelog record, encoded in the cache's reused buffer.
func (c *keyCache) set(rec *checkpoint.KeyRecord, digest uint64) error {
	c.buf = binary.LittleEndian.AppendUint64(c.buf[:0], digest)
	c.buf = checkpoint.AppendKey(c.buf, *rec)
	if err := c.store.Set(rec.Key, c.buf); err != nil {
		return keyStoreError{err}
	}
	return nil
}

// decodeStored reads a key store's value: the digest and the record.
func decodeStored(b []byte) (uint64, *checkpoint.KeyRecord, error) {
	if len(b) < 8 {
		return 0, nil, fmt.Errorf("a value of %d bytes: %w", len(b), checkpoint.ErrCorrupt)
	}
	rec, err := checkpoint.DecodeOwned(b[8:]) // b is ours: the state is read in place
	if err == nil && rec.Key == nil {
		err = fmt.Errorf("not a key record: %w", checkpoint.ErrCorrupt)
	}
	if err != nil {
		return 0, nil, err
	}
	return binary.LittleEndian.Uint64(b), rec.Key, nil
}

// UseKeyStore makes the worker keep its keys in s, holding at most
// cacheKeys of them in memory after each checkpoint (the keys changed since
// the last checkpoint stay in memory until the next one writes them: at
// most the records of one checkpoint interval). The worker must hold no
// keys yet; it closes s on Close.
func (w *Worker) UseKeyStore(s KeyStore, cacheKeys int) error {
	switch {
	case s == nil:
		return fmt.Errorf("partition %d: no key store", w.partition)
	case cacheKeys < 1:
		return fmt.Errorf("partition %d: %d keys in memory: must be ≥ 1 with a key store", w.partition, cacheKeys)
	case w.Keys() != 0:
		return fmt.Errorf("partition %d: a key store is set before any key, and the worker holds %d", w.partition, w.Keys())
	}
	w.cache = &keyCache{store: s, max: cacheKeys}
	return nil
}

// Close releases the worker's key store, if it has one. The worker must
// not be used after.
func (w *Worker) Close() error {
	if w.cache == nil {
		return nil
	}
	if err := w.cache.store.Close(); err != nil {
		return fmt.Errorf("partition %d: %w", w.partition, err)
	}
	return nil
}

// Resident is the number of keys held in memory: Keys without a key store.
func (w *Worker) Resident() int { return len(w.keys) }

// lookup returns key's state, read back from the key store (and then held
// in memory, clean) when it is not in memory; false when the worker has
// none.
func (w *Worker) lookup(key string) (*keyed.State, bool, error) {
	if ks, ok := w.keys[key]; ok || w.cache == nil {
		return ks, ok, nil
	}
	return w.fault(key)
}

// fault reads key back from the key store into memory (lookup's miss).
func (w *Worker) fault(key string) (*keyed.State, bool, error) {
	rec, digest, ok, err := w.stored(key)
	if !ok || err != nil {
		return nil, false, err
	}
	ks, err := w.model.Decode(rec)
	if err != nil {
		return nil, false, fmt.Errorf("partition %d: key %q from the key store: %w", w.partition, key, err)
	}
	ks.Mark.Digest = digest
	w.keys[key] = ks
	return ks, true, nil
}

// stored reads key's record from the key store, and the digest of its
// latest changelog record.
func (w *Worker) stored(key string) (*checkpoint.KeyRecord, uint64, bool, error) {
	b, ok, err := w.cache.store.Get(key)
	if err != nil {
		return nil, 0, false, keyStoreError{err}
	}
	if !ok {
		return nil, 0, false, nil
	}
	digest, rec, err := decodeStored(b)
	if err == nil && rec.Key != key {
		err = fmt.Errorf("the record of key %q: %w", rec.Key, checkpoint.ErrCorrupt)
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("partition %d: key %q from the key store: %w", w.partition, key, err)
	}
	return rec, digest, true, nil
}

// spill evicts clean keys, once a checkpoint has made every key clean,
// until at most the cache's bound stay in memory: first those the
// checkpoint did not write that the key store holds as they are, then the
// others it did not write, then those it wrote, in key order. An evicted key
// whose state is newer than its record in the key store is written there
// first (from the checkpoint's record when it has one); nothing is evicted
// unless all of them were written.
func (w *Worker) spill(c *CheckpointBatch) error {
	over := len(w.keys) - w.cache.max
	if over <= 0 {
		return nil
	}
	written := func(key string) (int, bool) {
		return slices.BinarySearchFunc(c.Keys, key, func(r checkpoint.KeyRecord, k string) int { return strings.Compare(r.Key, k) })
	}
	victims := make([]string, 0, over)
	for _, stored := range []bool{true, false} {
		for key, ks := range w.keys {
			if len(victims) == over {
				break
			}
			if _, ok := written(key); !ok && ks.Mark.Unstored != stored {
				victims = append(victims, key)
			}
		}
	}
	for i := 0; i < len(c.Keys) && len(victims) < over; i++ {
		if _, ok := w.keys[c.Keys[i].Key]; ok {
			victims = append(victims, c.Keys[i].Key)
		}
	}
	for _, key := range victims {
		ks := w.keys[key]
		if !ks.Mark.Unstored {
			continue
		}
		var rec checkpoint.KeyRecord
		if i, ok := written(key); ok && !ks.HoldsSourced() { // the changelog's record is the store's
			rec = c.Keys[i]
		} else {
			state, err := w.model.AppendState(w.stateBuf[:0], ks) // set copies it
			if err != nil {
				return fmt.Errorf("key %q: %w", key, err)
			}
			w.stateBuf = state
			rec = checkpoint.KeyRecord{Partition: w.partition, Key: key, Epoch: w.epoch, AppliedThrough: ks.Applied, State: state}
		}
		if err := w.cache.set(&rec, ks.Mark.Digest); err != nil {
			return err
		}
	}
	if err := w.cache.store.Flush(); err != nil {
		return keyStoreError{err}
	}
	for _, key := range victims {
		w.model.Release(w.keys[key])
		delete(w.keys, key)
	}
	return nil
}
