package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

// Restored is what Restore found.
type Restored struct {
	// From is the offset per input topic to resume reading from.
	From [2]int64
	// Problems are the records that could not be used; their keys replay
	// from further back and are rewritten by the next checkpoint.
	Problems []error
	// MaxEpoch is the highest ownership epoch in the store: the restoring
	// owner claims checkpoint.NextEpoch(MaxEpoch, generation).
	MaxEpoch checkpoint.Epoch
	// Fenced counts records of former owners that the fencing rule set aside.
	Fenced int
	// Torn lists the checkpoints read without their marker (their writer
	// stopped while writing them): their key records were set aside, their
	// keys keep their records of the checkpoint before and are written
	// again at the next checkpoint (checkpoint's torn.go).
	Torn []checkpoint.TornCheckpoint
	// Read counts the checkpoint records read (a catch-up's: those after
	// the resumed checkpoint).
	Read int
	// Marker is the last checkpoint's marker restored from (nil: none), and
	// Unowned the checkpoint records read before any ownership record:
	// what Runner checks against the group's committed offsets to refuse a
	// changelog that cannot be complete.
	Marker  *checkpoint.Marker
	Unowned int
	// Owner is the last accepted ownership record read (nil: none), and End
	// the store position after the last record read (a positioned store's).
	Owner *checkpoint.Ownership
	End   int64
	// Rewrite is set when keys must be written again at once: their torn or
	// fenced records follow their accepted ones in the changelog, and the
	// cleaner would otherwise remove the accepted ones.
	Rewrite bool
	// StandInsDropped counts the fenced records of keys that had no record
	// at the last marker (a frozen former owner wrote them first), set
	// aside once the marker's digest showed it.
	StandInsDropped int
	// Verified is set when the digest of the state loaded is the last
	// marker's (a restore, or a catch-up, that proved itself); Mismatch when
	// it was not, and the partition was rebuilt from its inputs instead.
	Verified, Mismatch bool
	// Origin is where the partition's state came from.
	Origin Origin
	// CaughtUp is, for a resumed state, how many positions of the
	// checkpoint log written after its last checkpoint (by other owners)
	// were read to bring it up to date: 0 when nothing came between.
	CaughtUp int64
}

// Origin is where a partition's state came from when its Runner started.
// Resuming is the one name for reusing a state instead of restoring it: a
// state kept in memory across a rebalance (Kept) or parked on disk by a
// former process (Kept.Park, Unpark) resumes, catching up from the log's
// tail when other owners wrote to it meanwhile (Restored.CaughtUp).
type Origin uint8

// Origins.
const (
	// FromChangelog: restored, the changelog read from its start.
	FromChangelog Origin = iota
	// FromMemory: resumed from the state this process kept (RunnerConfig.Kept).
	FromMemory
	// FromParked: resumed from the key store a former process parked (Unpark).
	FromParked
	// FromInputs: rebuilt from the input topics' first records, as the
	// changelog could not restore it exactly (rebuild.go).
	FromInputs
)

// TornRecords counts the key records of torn checkpoints set aside.
func (res Restored) TornRecords() int {
	n := 0
	for _, t := range res.Torn {
		n += t.Records
	}
	return n
}

// Resumed reports whether the state was resumed rather than restored.
func (o Origin) Resumed() bool { return o == FromMemory || o == FromParked }

// String names the origin: changelog, memory or parked.
func (o Origin) String() string {
	switch o {
	case FromChangelog:
		return "changelog"
	case FromMemory:
		return "memory"
	case FromParked:
		return "parked"
	case FromInputs:
		return "inputs"
	}
	return "unknown"
}

// origin is where a kept state came from.
func (k *Kept) origin() Origin {
	if k.parked {
		return FromParked
	}
	return FromMemory
}

// Restore loads the partition's checkpoint into an empty worker. A key whose
// record cannot be decoded, or stands in for a fenced write, is reported,
// replayed from further back (see checkpoint.Snapshot.ReplayFrom) and marked
// dirty, so that the next checkpoint supersedes its record. Keys are built
// while the store reads their records, so no more than one record is held
// beside the keys; with a key store, the records go there, and only the
// cache's bound of keys stays in memory. On error the worker is left empty.
func (w *Worker) Restore(ctx context.Context, store checkpoint.Store) (Restored, error) {
	return w.restoreWith(ctx, store.Load)
}

// loadFunc is a store's Load, or a PositionedStore's LoadUntil bound to a
// position.
type loadFunc func(ctx context.Context, partition int, sink checkpoint.KeySink) (checkpoint.Snapshot, error)

// restoreWith is Restore reading the store with load.
func (w *Worker) restoreWith(ctx context.Context, load loadFunc) (Restored, error) {
	if w.Keys() != 0 || len(w.keys) != 0 {
		return Restored{}, fmt.Errorf("restore partition %d: worker already holds %d keys", w.partition, w.Keys())
	}
	res, err := w.restore(ctx, load)
	if err != nil {
		w.keys, w.dirty = map[string]*keyed.State{}, nil
		if w.cache != nil {
			w.cache.count = 0
		}
		return Restored{}, fmt.Errorf("restore partition %d: %w", w.partition, err)
	}
	return res, nil
}

func (w *Worker) restore(ctx context.Context, load loadFunc) (Restored, error) {
	sink := &restoring{w: w}
	if w.cache != nil {
		if err := w.cache.store.Reset(); err != nil {
			return Restored{}, keyStoreError{err}
		}
		sink.held = map[string]uint64{}
	}
	w.digest, w.unheldDigest = 0, nil
	// Every state comes from its changelog record, so every awaited input
	// to re-read is one a state lacks: the re-read decodes only those.
	w.model.CollectMissing()
	snap, err := load(ctx, w.partition, sink)
	w.model.KeepMissingFrom(snap.Marker.RereadFrom())
	if err != nil {
		w.model.ForgetMissing()
		return Restored{}, err
	}
	res, err := w.restored(&snap, sink)
	w.reread.selective = err == nil && w.reread.floor >= 0
	if !w.reread.selective {
		w.model.ForgetMissing()
	}
	return res, err
}

// ErrChangelogIncomplete reports a changelog that cannot hold every key's
// state: it started over (records before any ownership claim), or it holds
// no checkpoint as recent as the consumer group's committed offsets, which
// are only committed after a checkpoint is written.
var ErrChangelogIncomplete = errors.New("the changelog cannot be complete")

// complete refuses to run from a changelog that cannot be complete: the
// keys missing from it would silently start over.
func (res Restored) complete(partition int, committed int64) error {
	const what = "restoring from it would start every key it lacks from nothing; rebuild the state from the input topics instead (docs/OPERATIONS.md, \"Rebuilding state\")"
	switch {
	case res.Unowned > 0:
		return fmt.Errorf("partition %d: %w: it holds %d checkpoint records before any ownership claim, so it started over (the topic was deleted and recreated?); %s",
			partition, ErrChangelogIncomplete, res.Unowned, what)
	case committed > 0 && res.Marker == nil:
		return fmt.Errorf("partition %d: %w: the consumer group committed offset %d of the events topic, which follows a checkpoint, but the changelog holds none; %s",
			partition, ErrChangelogIncomplete, committed, what)
	case committed > 0 && res.Marker.Through[EventsTopic]+1 < committed:
		return fmt.Errorf("partition %d: %w: its last checkpoint covers the events topic through offset %d, but the consumer group committed offset %d, after a later one; %s",
			partition, ErrChangelogIncomplete, res.Marker.Through[EventsTopic], committed, what)
	}
	return nil
}

// ErrLearnerChanged reports a checkpoint whose key states belong to another
// learner configuration (name, dimension or parameters) than the
// configured one: changing the learner of a running deployment is a
// migration, which a restore never does silently.
var ErrLearnerChanged = errors.New("the changelog holds key states of another learner configuration")

// configurationChanged refuses a restore that met key states of another
// learner configuration: rebuilding each such key from the input topics (as
// any undecodable record is) would drop operator resets, cost one warning per
// key, and stop at the input's retention. It says what to do instead.
func configurationChanged(unheld map[string]error) error {
	n, first := 0, ""
	for _, key := range slices.Sorted(maps.Keys(unheld)) {
		if err := unheld[key]; errors.Is(err, learners.ErrConfiguration) {
			if n++; n == 1 {
				first = fmt.Sprintf("key %s: %v", topics.Excerpt(key), err)
			}
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%w (%d keys; first, %s). Changing DRIFTSTREAM_LEARNER, DRIFTSTREAM_LEARNER_PARAMS, DRIFTSTREAM_DIM, DRIFTSTREAM_HASH_BITS or DRIFTSTREAM_BIAS is a migration, not a restart: "+
		"either deploy the former configuration again, or run the new one as a new deployment with its own DRIFTSTREAM_CHANGELOG_TOPIC and DRIFTSTREAM_GROUP, "+
		"which learns every key afresh from the input topics' earliest retained records (operator resets are not carried over; docs/OPERATIONS.md, \"Changing the learner\")",
		ErrLearnerChanged, n, first)
}

// restored finishes a restore, or a catch-up (Runner.catchUp), once the store
// has handed every record to sink: it reports the records set aside, marks
// their keys dirty, and sets the replay start.
func (w *Worker) restored(snap *checkpoint.Snapshot, sink *restoring) (Restored, error) {
	dropped := sink.dropStandIns(snap)
	err := sink.err
	if err == nil && w.cache != nil {
		if err = w.cache.store.Flush(); err != nil {
			err = keyStoreError{err}
		}
		if sink.held != nil {
			w.cache.count = len(sink.held)
		}
	}
	if err != nil {
		return Restored{}, err
	}
	res := Restored{MaxEpoch: snap.MaxEpoch, Fenced: snap.Fenced, Marker: snap.Marker, Unowned: snap.Unowned, Read: snap.Read, Owner: snap.Owner, End: snap.End}
	for _, c := range snap.Ignored {
		res.Problems = append(res.Problems, c)
	}
	for _, c := range snap.Corrupt {
		res.Problems = append(res.Problems, c)
	}
	if err := configurationChanged(sink.unheld); err != nil {
		return Restored{}, err
	}
	for _, key := range slices.Sorted(maps.Keys(sink.unheld)) {
		if err := sink.unheld[key]; err != nil {
			res.Problems = append(res.Problems, fmt.Errorf("key %q: %w", key, err))
			snap.Corrupt = append(snap.Corrupt, checkpoint.Corruption{Key: key, Err: err})
		}
	}
	res.Torn = snap.Torn
	// The restore proves itself: the digest of what it loaded is the last
	// marker's (checkpoint's digest.go), unless some record could not be
	// used (then its key replays from further back, or the partition is
	// rebuilt).
	if snap.Marker != nil && len(snap.Corrupt) == 0 {
		if sink.digest != snap.Marker.Digest {
			return Restored{}, &inexactError{res: res, partition: w.partition, mismatch: &[2]uint64{snap.Marker.Digest, sink.digest}}
		}
		res.Verified = true
	}
	if w.cfg.KeysDepend() && len(snap.Corrupt) > 0 {
		return Restored{}, &inexactError{res: res, partition: w.partition}
	}
	w.digest = sink.digest
	for _, c := range snap.Corrupt {
		if c.Key != "" {
			w.markDirty(c.Key, w.keys[c.Key])
		}
	}
	// A torn checkpoint's records stay in the log until a later record of
	// their key supersedes them: the next checkpoint writes each of their
	// keys as restored.
	res.Torn = snap.Torn
	for _, t := range snap.Torn {
		for _, key := range t.Keys {
			w.markDirty(key, w.keys[key])
		}
	}
	for _, key := range dropped { // an empty record supersedes the zombie's
		w.markDirty(key, nil)
	}
	// A frozen former owner's record after a key's accepted one would have
	// the cleaner remove the accepted one: the key is written again.
	seen := map[string]bool{}
	for _, key := range snap.FencedKeys {
		if ks := w.keys[key]; !seen[key] && (ks == nil || !ks.Mark.Dirty) {
			w.markDirty(key, ks)
		}
		seen[key] = true
	}
	res.Rewrite = len(snap.Torn) > 0 || len(snap.FencedKeys) > 0
	res.StandInsDropped = len(dropped)
	absorb := snap.AbsorbFromKeys(func(key string) ([2]int64, bool) {
		if ks, ok := w.keys[key]; ok {
			return ks.Applied, true
		}
		if _, ok := sink.held[key]; w.cache == nil || (sink.held != nil && !ok) {
			return [2]int64{}, false
		}
		rec, _, ok, serr := w.stored(key)
		if serr != nil {
			err = serr
		}
		if !ok {
			return [2]int64{}, false
		}
		return rec.AppliedThrough, true
	})
	if err != nil {
		return Restored{}, err
	}
	// The next marker may only claim what this worker has processed: a key
	// rebuilt from further back is written at its actual progress.
	w.through = [2]int64{absorb[0] - 1, absorb[1] - 1}
	w.restorePeers(snap)
	// The events topic is read from further back when the keys' awaited
	// inputs are there (reread.go).
	until := absorb[EventsTopic]
	if snap.Marker != nil {
		until = max(until, snap.Marker.Through[EventsTopic]+1)
	}
	w.startReread(snap.Marker.RereadFrom(), absorb[EventsTopic], until)
	res.From = w.Next()
	return res, nil
}

// restoring is the checkpoint.KeySink a restore loads into: each record is
// decoded into the worker's key as it arrives, replacing the key's earlier
// record, and then dropped. With a key store, the key is kept in memory
// while the cache has room, and its record written there otherwise. A
// catch-up (Runner.catchUp, inPlace) loads into a worker that already holds keys,
// in memory and in its key store, which then answer Has.
type restoring struct {
	w *Worker
	// inPlace is set when the worker already holds the keys from before the
	// records loaded (a catch-up): it is not emptied, and its key store is
	// asked for the keys it holds.
	inPlace bool
	// unheld holds the keys whose latest record gave no key state: nil for
	// a key recorded as holding nothing, the decoding error otherwise.
	unheld map[string]error
	// held holds, with a key store and not in place, the keys whose latest
	// record decoded: the keys in the store (their names and the digests of
	// their records, not their states).
	held map[string]uint64
	// digest is the partition's digest over the records loaded (and, in
	// place, the worker's before them): what the last marker's must be.
	digest uint64
	// err is the key store's first failure; the records after it are
	// skipped, and the restore fails.
	err error
}

func (r *restoring) Reserve(n int) {
	if r.inPlace {
		return
	}
	if r.held != nil && len(r.held) == 0 {
		r.held = make(map[string]uint64, n) // the names of every key
	}
	if r.w.cache != nil {
		n = min(n, r.w.cache.max)
	}
	if len(r.w.keys) == 0 {
		r.w.keys = make(map[string]*keyed.State, n)
	}
}

func (r *restoring) Has(key string) bool {
	if _, ok := r.w.keys[key]; ok || r.stored(key) {
		return true
	}
	_, ok := r.unheld[key]
	return ok
}

// stored reports whether the key store holds key.
func (r *restoring) stored(key string) bool {
	switch {
	case r.held != nil:
		_, ok := r.held[key]
		return ok
	case !r.inPlace || r.w.cache == nil || r.err != nil:
		return false
	}
	_, ok, err := r.w.cache.store.Get(key)
	if err != nil {
		r.err = keyStoreError{err}
	}
	return ok
}

func (r *restoring) Put(rec *checkpoint.KeyRecord) {
	if r.err != nil {
		return
	}
	delete(r.unheld, rec.Key)
	var err error
	if len(rec.State) != 0 {
		var ks *keyed.State
		if ks, err = r.w.model.Decode(rec); err == nil {
			r.hold(rec, ks)
			return
		}
	}
	old, inMemory := r.w.keys[rec.Key]
	if d := rec.Digest(); true {
		r.digest += d - r.prior(rec.Key, old, inMemory)
		if d != 0 { // counted, not held: the key's next record replaces it
			if r.w.unheldDigest == nil {
				r.w.unheldDigest = map[string]uint64{}
			}
			r.w.unheldDigest[rec.Key] = d
		}
	}
	r.w.model.Release(old)
	if r.w.cache != nil && (inMemory || r.stored(rec.Key)) {
		if r.held != nil {
			delete(r.held, rec.Key)
		} else {
			r.w.cache.count--
		}
		if r.err == nil {
			if err := r.w.cache.store.Delete(rec.Key); err != nil {
				r.err = keyStoreError{err}
			}
		}
	}
	delete(r.w.keys, rec.Key)
	if r.unheld == nil {
		r.unheld = map[string]error{}
	}
	r.unheld[rec.Key] = err
}

// hold keeps a key whose record decoded: in memory, or with a key store
// and no room left in the cache, there.
func (r *restoring) hold(rec *checkpoint.KeyRecord, ks *keyed.State) {
	old, inMemory := r.w.keys[rec.Key]
	ks.Mark.Digest = rec.Digest()
	r.digest += ks.Mark.Digest - r.prior(rec.Key, old, inMemory)
	r.w.model.Release(old) // replaced (in place): its warning level goes with it
	if r.w.cache == nil {
		r.w.keys[rec.Key] = ks
		return
	}
	switch {
	case r.held != nil:
		r.held[rec.Key] = ks.Mark.Digest
	case !inMemory && !r.stored(rec.Key):
		r.w.cache.count++ // a key new to the worker (in place)
	}
	if inMemory || len(r.w.keys) < r.w.cache.max {
		ks.Mark.Unstored = true // written when evicted
		r.w.keys[rec.Key] = ks
		return
	}
	if r.err == nil {
		r.err = r.w.cache.set(rec, ks.Mark.Digest)
	}
}

// dropStandIns tells apart the fenced records standing in for keys that
// have no accepted record (checkpoint's fencing rule): a frozen former
// owner's record of a key that had none at the last marker (it wrote the
// key first), or one the cleaner left alone by removing the accepted record
// it superseded. The marker's digest counts the latter, not the former: when
// the digest of what was loaded, without the stand-ins, is the marker's,
// every stand-in is of a key that held nothing at the marker, and it is
// dropped (the key holds nothing, and is written so at the next
// checkpoint); otherwise they stay (the key replays from further back, or
// the partition is rebuilt). It returns the keys dropped.
func (r *restoring) dropStandIns(snap *checkpoint.Snapshot) []string {
	if snap.Marker == nil || r.err != nil {
		return nil
	}
	var keys []string
	var sum uint64
	for _, c := range snap.Corrupt {
		if c.Key == "" || !errors.Is(c.Err, checkpoint.ErrFenced) {
			return nil // another problem: nothing to tell apart
		}
		ks, inMemory := r.w.keys[c.Key]
		sum += r.prior(c.Key, ks, inMemory)
		if r.err != nil {
			return nil
		}
		keys = append(keys, c.Key)
	}
	if len(keys) == 0 || r.digest-sum != snap.Marker.Digest {
		return nil
	}
	for _, key := range keys {
		r.Put(&checkpoint.KeyRecord{Partition: r.w.partition, Key: key, AppliedThrough: [2]int64{checkpoint.NoOffset, checkpoint.NoOffset}})
	}
	snap.Corrupt = nil
	return keys
}

// prior is the digest of the record key had before the one being loaded:
// the key's in memory (old), in the key store, or unheld; 0 for none.
func (r *restoring) prior(key string, old *keyed.State, inMemory bool) uint64 {
	d, unheld := r.w.unheldDigest[key]
	if unheld {
		delete(r.w.unheldDigest, key)
	}
	switch {
	case inMemory:
		return d + old.Mark.Digest
	case r.held != nil:
		return d + r.held[key]
	case !r.inPlace || r.w.cache == nil || r.err != nil:
		return d
	}
	b, ok, err := r.w.cache.store.Get(key)
	switch {
	case err != nil:
		r.err = keyStoreError{err}
	case ok && len(b) >= 8:
		d += binary.LittleEndian.Uint64(b)
	}
	return d
}
