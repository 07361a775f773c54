package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/driftstream/driftstream/checkpoint"
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
	keys := w.dirty
	// Deterministic record order, by key (spill searches it): an index of
	// the list sorted, the list left as it is (the states' slots).
	type keyAt struct {
		key string
		at  int32
	}
	order := make([]keyAt, len(keys))
	for i := range keys {
		order[i] = keyAt{keys[i].key, int32(i)}
	}
	slices.SortFunc(order, func(a, b keyAt) int { return strings.Compare(a.key, b.key) })
	c := CheckpointBatch{Keys: make([]checkpoint.KeyRecord, 0, len(keys)), Marker: w.marker(w.epoch)}
	fail := func(err error) (CheckpointBatch, error) { // every key stays dirty, its early record kept
		return CheckpointBatch{}, fmt.Errorf("checkpoint partition %d: %w", w.partition, err)
	}
	// The records encoded when their key changed (dirty.go) are taken as
	// they are, in the early buffer's chunks; the others share one buffer,
	// sized for them, and are taken as offsets into it until every record
	// is in, as it may grow. None is written into once taken.
	cold := 0
	for i := range keys {
		if keys[i].early == nil {
			cold++
		}
	}
	slab := make([]byte, 0, cold*cmp.Or(w.recordHint, firstHint)*5/4)
	type span struct{ at, end int }
	spans := make([]span, 0, len(keys))
	once := 0
	for j := 0; j < len(order); j++ {
		d := &keys[order[j].at]
		for j+1 < len(order) && order[j+1].key == d.key { // a key not held, then rebuilt by replay: written once
			j++
			if next := &keys[order[j].at]; next.state != nil {
				d = next
			}
		}
		rec := checkpoint.KeyRecord{Partition: w.partition, Key: d.key, Epoch: w.epoch, AppliedThrough: [2]int64{checkpoint.NoOffset, checkpoint.NoOffset}}
		at, end := 0, 0
		switch ks := d.state; {
		case ks != nil && d.early != nil: // encoded when it last changed: no span in the slab
			rec.AppliedThrough, rec.State = d.applied, d.early
			c.Bytes += len(d.early)
		default:
			var err error
			if ks == nil { // not held when it changed: held now unless its record was unreadable
				if ks, _, err = w.lookup(d.key); err != nil {
					return fail(err)
				}
			}
			if ks == nil {
				break
			}
			at = len(slab)
			// Awaited inputs the events topic gives back left out (reread.go).
			b, err := w.model.AppendChangelog(slab, ks)
			if err != nil {
				return fail(fmt.Errorf("key %q: %w", d.key, err))
			}
			slab, end = b, len(b)
			rec.AppliedThrough = ks.Applied
		}
		if d.state != nil && !d.again {
			once++
		}
		spans = append(spans, span{at, end})
		c.Bytes += end - at
		c.Keys = append(c.Keys, rec)
	}
	for i, sp := range spans {
		if sp.end > sp.at {
			c.Keys[i].State = slab[sp.at:sp.end:sp.end]
		}
	}
	if len(c.Keys) > 0 {
		w.recordHint = c.Bytes/len(c.Keys) + 1
	}
	c.Marker.Digest = w.digestWritten(c.Keys)
	w.early.taken(len(c.Keys), w.recordHint)
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
	w.early.decide(once, len(c.Keys))
	return c, nil
}

// Through returns the last offset processed per input topic (−1 for none).
func (w *Worker) Through() [2]int64 { return w.through }

// SetEpoch sets the ownership epoch written into the worker's checkpoints.
func (w *Worker) SetEpoch(e checkpoint.Epoch) { w.epoch = e }

// SuppressBelow stops outputs for records below these offsets: they were
// delivered before the restart (the group's committed offsets).
func (w *Worker) SuppressBelow(offsets [2]int64) { w.suppress = offsets }

// digestWritten brings the partition's digest up to date with records, the
// key records of a checkpoint: each one's digest replaces that of its key's
// former record (checkpoint's digest.go). It returns the marker's digest.
// Every key written that holds a state is in memory here (a dirty key stays
// there until written).
func (w *Worker) digestWritten(records []checkpoint.KeyRecord) uint64 {
	for i := range records {
		rec := &records[i]
		d := rec.Digest()
		old, unheld := w.unheldDigest[rec.Key]
		if unheld {
			delete(w.unheldDigest, rec.Key)
		}
		if ks := w.keys[rec.Key]; ks != nil {
			old += ks.Mark.Digest
			ks.Mark.Digest = d
		}
		w.digest += d - old
	}
	return w.digest
}
