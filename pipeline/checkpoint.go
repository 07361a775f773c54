package pipeline

import (
	"context"
	"fmt"
	"slices"

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
	w.dirty = append(w.dirty, key)
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
	slices.Sort(w.dirty) // deterministic record order
	w.dirty = slices.Compact(w.dirty)
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
	for _, k := range keys {
		rec := checkpoint.KeyRecord{Partition: w.partition, Key: k, Epoch: w.epoch, AppliedThrough: [2]int64{checkpoint.NoOffset, checkpoint.NoOffset}}
		ks, ok, err := w.lookup(k) // held, unless its record was unreadable
		if err != nil {
			return fail(err)
		}
		if ok {
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
	for _, k := range keys {
		if ks, ok := w.keys[k]; ok {
			ks.Mark.Dirty = false
		}
	}
	w.dirty = keys[:0] // the records hold the strings, not the slice
	return c, nil
}

// Through returns the last offset processed per input topic (−1 for none).
func (w *Worker) Through() [2]int64 { return w.through }

// SetEpoch sets the ownership epoch written into the worker's checkpoints.
func (w *Worker) SetEpoch(e checkpoint.Epoch) { w.epoch = e }

// SuppressBelow stops outputs for records below these offsets: they were
// delivered before the restart (the group's committed offsets).
func (w *Worker) SuppressBelow(offsets [2]int64) { w.suppress = offsets }
