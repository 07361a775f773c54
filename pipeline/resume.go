package pipeline

import (
	"context"

	"github.com/driftstream/driftstream/checkpoint"
)

// Kept is a partition's state after a clean stop (final checkpoint written
// and committed), held in memory for the partition's next Runner in the
// same process, or parked (Park) for the next process. It is the log's
// state at the position where its last checkpoint ended: the next Runner
// resumes it as is when its own claim lands right there, catches it up from
// the records written in between otherwise (catchUp), and restores from the
// store only when those cannot be read.
type Kept struct {
	w     *Worker
	end   int64 // the store position after the last record written
	epoch checkpoint.Epoch
	// parked is set when the state comes from a parked key store (Unpark).
	parked bool
}

// Keys is the number of keys the kept state holds.
func (k *Kept) Keys() int { return k.w.Keys() }

// Close releases the kept state's key store, if it has one: call it when
// the state will not be resumed.
func (k *Kept) Close() error { return k.w.Close() }

// positions records where a PositionedStore's writes end, for Kept.
type positions struct {
	PositionedStore
	end   int64
	known bool
}

func (p *positions) Claim(ctx context.Context, o checkpoint.Ownership) error {
	at, err := p.ClaimAt(ctx, o)
	p.end, p.known = at+1, err == nil
	return err
}

func (p *positions) Write(ctx context.Context, keys []checkpoint.KeyRecord, m checkpoint.Marker) error {
	end, err := p.WriteAt(ctx, keys, m)
	p.end, p.known = end, err == nil
	return err
}

// resume takes over the kept state when the claim of the next epoch lands
// right where the kept state's last checkpoint ended: nothing was written to
// the partition in between, so the store holds exactly what memory holds.
// When something was, the kept state catches up from the log's tail
// (catchUp). ok is false when there is no kept state to take.
func (r *Runner) resume(ctx context.Context) (res Restored, ok bool, err error) {
	k := r.cfg.Kept
	if k == nil || r.pos == nil {
		return Restored{}, false, nil
	}
	epoch := checkpoint.NextEpoch(k.epoch, r.cfg.Generation)
	if err := r.claim(ctx, epoch); err != nil {
		k.Close() // the claim's error is the one to report
		return Restored{}, false, err
	}
	if r.pos.end-1 != k.end {
		r.log.Info("partition state kept (in memory, or parked by a former process), but its checkpoint log moved on since: catching it up from the log's tail", "parked", k.parked, "kept_end", k.end, "claimed_at", r.pos.end-1)
		return r.catchUp(ctx, k, epoch)
	}
	if err := r.w.Close(); err != nil { // the kept worker has its own key store
		r.log.Warn("closing the partition's unused key store", "err", err)
	}
	r.w = k.w
	r.w.SetEpoch(epoch)
	return Restored{From: r.w.Next(), MaxEpoch: epoch, Origin: k.origin()}, true, nil
}
