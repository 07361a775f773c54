package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
)

// Checkpoint writes every key changed since the last checkpoint, then the
// partition marker, to store, under the worker's epoch. The caller flushes
// outputs before and commits input offsets after (docs/spec/DESIGN.md §4); on error nothing
// is marked clean. A dirty key the worker does not hold (its record was
// unreadable and replay has not rebuilt it) is written with an empty state,
// which supersedes the unreadable record.
func (w *Worker) Checkpoint(ctx context.Context, store checkpoint.Store) (records, bytes int, err error) {
	c, err := w.TakeCheckpoint()
	if err != nil {
		return 0, 0, err
	}
	if err := store.Write(ctx, c.Keys, c.Marker); err != nil {
		for _, rec := range c.Keys {
			w.markDirty(rec.Key, w.keys[rec.Key]) // an evicted key is read back from the key store
		}
		return 0, 0, fmt.Errorf("checkpoint partition %d: %w", w.partition, err)
	}
	return len(c.Keys), c.Bytes, nil
}

// markDirty records that key changed since the last checkpoint; ks is the
// key's state, nil when the worker does not hold it.
func (w *Worker) markDirty(key string, ks *keyed.State) {
	if ks != nil {
		ks.Mark.Unstored = true
		if ks.Mark.Dirty {
			return
		}
		ks.Mark.Dirty = true
	}
	w.dirty = append(w.dirty, dirtyKey{key, ks})
}

// dirtyKey is a key changed since the last checkpoint, with its state when
// the worker held it then. A held key stays in the worker's map, as that
// state, until the checkpoint that writes it (keys leave the map only when
// spilled, and a dirty key is never spilled before it is written), so the
// checkpoint reaches the state without looking the key up again; a key not
// held then is looked up at the checkpoint (replay may have rebuilt it).
type dirtyKey struct {
	key   string
	state *keyed.State
}

// CheckpointBatch is one checkpoint of a partition, encoded and ready to write:
// the key records of every key changed since the last one, and the marker.
// It shares no memory with the worker, so it can be written while the
// worker goes on (the Runner's write-behind).
type CheckpointBatch struct {
	Keys   []checkpoint.KeyRecord
	Marker checkpoint.Marker
	// Bytes is the learner state the key records hold.
	Bytes int
}

// TakeCheckpoint encodes every key changed since the last checkpoint, and
// the marker of the offsets processed so far, and marks the keys clean: the
// caller must write the batch, or fail the partition (a restore then
// starts from the last batch written). With a key store, the clean keys
// beyond the cache's bound are then evicted (Worker.spill); on error no key
// is marked clean and none evicted.
func (w *Worker) TakeCheckpoint() (CheckpointBatch, error) {
	// Deterministic record order, by key (spill searches it); a key listed
	// twice (not held, then rebuilt by replay) is written once.
	slices.SortFunc(w.dirty, func(a, b dirtyKey) int { return strings.Compare(a.key, b.key) })
	w.dirty = slices.CompactFunc(w.dirty, func(a, b dirtyKey) bool { return a.key == b.key })
	keys := w.dirty
	c := CheckpointBatch{Keys: make([]checkpoint.KeyRecord, 0, len(keys)), Marker: w.marker(w.epoch)}
	fail := func(err error) (CheckpointBatch, error) { // every key stays dirty
		return CheckpointBatch{}, fmt.Errorf("checkpoint partition %d: %w", w.partition, err)
	}
	// The key records share one buffer, sized by the last checkpoint's
	// bytes per record with a quarter to spare: one allocation per
	// checkpoint, not one (or more) per key. A record keeps its bytes when
	// the buffer grows (append copies them to a new one), and no record is
	// written into once taken.
	slab := make([]byte, 0, len(keys)*w.recordHint*5/4)
	for i, dk := range keys {
		k, ks := dk.key, dk.state
		rec := checkpoint.KeyRecord{Partition: w.partition, Key: k, Epoch: w.epoch, AppliedThrough: [2]int64{checkpoint.NoOffset, checkpoint.NoOffset}}
		var err error
		if ks == nil { // not held when it changed: held now unless its record was unreadable
			if ks, _, err = w.lookup(k); err != nil {
				return fail(err)
			}
			keys[i].state = ks
		}
		if ks != nil {
			at := len(slab)
			// Awaited inputs the events topic gives back left out (reread.go).
			if slab, err = w.model.AppendChangelog(slab, ks); err != nil {
				return fail(fmt.Errorf("key %q: %w", k, err))
			}
			rec.AppliedThrough, rec.State = ks.Applied, slab[at:len(slab):len(slab)]
		}
		c.Bytes += len(rec.State)
		c.Keys = append(c.Keys, rec)
	}
	if len(keys) > 0 {
		w.recordHint = len(slab)/len(keys) + 1
	}
	if w.cache != nil {
		if err := w.spill(&c); err != nil {
			return fail(err)
		}
	}
	for i := range keys {
		if ks := keys[i].state; ks != nil {
			ks.Mark.Dirty = false
		}
		keys[i] = dirtyKey{} // the records hold the strings, not the slice; no state kept alive
	}
	w.dirty = keys[:0]
	return c, nil
}

// Through returns the last offset processed per input topic (−1 for none).
func (w *Worker) Through() [2]int64 { return w.through }

// SetEpoch sets the ownership epoch written into the worker's checkpoints.
func (w *Worker) SetEpoch(e checkpoint.Epoch) { w.epoch = e }

// SuppressBelow stops outputs for records below these offsets: they were
// delivered before the restart (the group's committed offsets).
func (w *Worker) SuppressBelow(offsets [2]int64) { w.suppress = offsets }
