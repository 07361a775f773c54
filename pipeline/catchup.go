package pipeline

import (
	"context"

	"github.com/driftstream/driftstream/checkpoint"
)

// A kept state (in memory across a rebalance, or parked by a former
// process) whose checkpoint log moved on — another member owned the
// partition for a while, as in a rolling update — is brought up to date
// from the log's tail instead of being rebuilt from all of it, as Kafka
// Streams restores a local store from its checkpointed changelog offset:
// the records written after the kept state's last checkpoint are absorbed
// into it under the fencing rule (checkpoint.Resume and LoadRange), which
// gives the state a full restore gives (checked record by record by
// checkpoint's TestResumedSnapshotMatchesAFullLoad, and end to end by
// TestKeptStateResumesOnlyWhenNothingCameBetween).

// catchUp brings k, whose last checkpoint ended at log position k.end, up
// to the Runner's claim of epoch, which landed later, and makes it the
// Runner's worker. ok is false when the tail cannot be read (retention
// deleted its start, the store failed): k is closed then, and the caller
// restores. A claim refused (err) is the partition's failure, as in resume.
func (r *Runner) catchUp(ctx context.Context, k *Kept, epoch checkpoint.Epoch) (res Restored, ok bool, err error) {
	sink := &restoring{w: k.w, inPlace: true, digest: k.w.digest}
	p := r.cfg.Partition
	snap, err := checkpoint.Resume(sink, checkpoint.Ownership{Partition: p, Epoch: k.epoch, Owner: r.cfg.Owner},
		k.w.marker(k.epoch))
	giveUp := func(err error) (Restored, bool, error) {
		r.log.Warn("partition state kept, but its checkpoint log's tail could not be read: restoring it", "parked", k.parked, "kept_end", k.end, "err", err)
		if cerr := k.Close(); cerr != nil {
			r.log.Warn("closing the kept state's key store", "err", cerr)
		}
		return Restored{}, false, nil
	}
	if err != nil {
		return giveUp(err)
	}
	from, read := k.end, int64(0)
	for {
		to := r.pos.end - 1 // this Runner's claim
		if err := r.pos.LoadRange(ctx, p, from, to, snap); err != nil {
			return giveUp(err)
		}
		if sink.err != nil {
			return giveUp(sink.err)
		}
		read += to - from
		if snap.MaxEpoch < epoch {
			break
		}
		// Owners came and went meanwhile, one of them with an epoch at or
		// above the one claimed: claim above it, unless it is the live
		// owner of a newer generation, and read what came since.
		if err := r.checkGeneration(ctx, snap.Owner); err != nil {
			k.Close()
			return Restored{}, false, err
		}
		epoch = checkpoint.NextEpoch(snap.MaxEpoch, r.cfg.Generation)
		if err := r.claim(ctx, epoch); err != nil {
			k.Close()
			return Restored{}, false, err
		}
		from = to
	}
	if res, err = k.w.restored(snap, sink); err != nil {
		return giveUp(err)
	}
	res.Origin, res.CaughtUp = k.origin(), read
	k.w.SetEpoch(epoch)
	if err := r.w.Close(); err != nil { // the kept worker has its own key store
		r.log.Warn("closing the partition's unused key store", "err", err)
	}
	r.w = k.w
	return res, true, nil
}
