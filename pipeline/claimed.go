package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/driftstream/driftstream/checkpoint"
)

// A Runner's state is the log's state as of its claim. Every later reader
// of the partition's log — the next owner's restore, a kept state's
// catch-up — takes what precedes the claim under the fencing rule, and
// nothing after it but the claimer's own writes (and newer claims). So a
// restore that reads the log and then claims must hold everything written
// between the end of its read and its claim; when something came between (a
// former owner finishing a checkpoint, a newer owner's claim), it reads the
// partition again up to and including its claim (Runner.restore), and a
// kept state catches up to its claim the same way (catchUp). A state read
// short of its claim would resume from one cut of the log while the next
// owner restores another: with a population model (keys that depend on
// one another through a shared part) that is a silent divergence.
//
// A claim is ordered by its epoch, whose sequence number outranks the
// consumer-group generation, so a member whose generation ended while it
// was frozen (a zombie) could claim above the live owner of a newer
// generation and fence it. checkGeneration refuses that.

// checkGeneration refuses to claim above the partition's current owner when
// that owner claimed in a newer consumer-group generation than this
// Runner's: this Runner's generation has ended (its member was frozen, or
// cut off, while the group moved on), and its claim would fence the live
// owner. A group whose generations started over (deleted and recreated, or
// its offsets expired) has newer generations in its log too; the group
// coordinator tells the two apart, as it refuses an ended generation's
// commit: the committed offsets are committed again. With none committed
// yet the claim goes ahead.
func (r *Runner) checkGeneration(ctx context.Context, owner *checkpoint.Ownership) error {
	if owner == nil || r.cfg.Generation <= 0 || int64(uint32(owner.Epoch)) <= int64(r.cfg.Generation) {
		return nil
	}
	stale := fmt.Errorf("partition %d: its owner in the changelog claimed it in generation %d, after this member's %d: %w",
		r.cfg.Partition, uint32(owner.Epoch), r.cfg.Generation, ErrLost)
	if r.cfg.Committer == nil || (r.cfg.Committed[EventsTopic] < 0 && r.cfg.Committed[LabelsTopic] < 0) {
		r.log.Warn("the changelog's owner claimed the partition in a newer consumer-group generation than this member's, and nothing was committed to tell whether this generation has ended: claiming above it (the group started over?)",
			"owner_epoch", owner.Epoch.String(), "generation", r.cfg.Generation)
		return nil
	}
	err := r.do(ctx, StepCommit, func(ctx context.Context) error { return r.cfg.Committer.Commit(ctx, r.cfg.Committed) })
	switch {
	case errors.Is(err, ErrLost):
		return errors.Join(stale, err)
	case err != nil:
		return err
	}
	r.log.Warn("the changelog's owner claimed the partition in a newer consumer-group generation than this member's, yet the group accepts this generation's commits: the group started over; claiming above it",
		"owner_epoch", owner.Epoch.String(), "generation", r.cfg.Generation)
	return nil
}

// freshWorker is an empty worker for the Runner's partition, with its key
// store (emptied by the restore that follows).
func (r *Runner) freshWorker() (*Worker, error) {
	w, err := NewWorker(r.cfg.Pipeline, r.cfg.Partition)
	if err != nil {
		return nil, err
	}
	if r.cfg.KeyStore != nil {
		w.cache = &keyCache{store: r.cfg.KeyStore, max: r.cfg.CacheKeys}
	}
	return w, nil
}
