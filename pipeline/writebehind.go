package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// writeBehind writes a partition's outputs and checkpoints off the
// partition loop, so that the loop goes on processing while a write waits
// for the broker. It has two stages, each a goroutine: the first writes
// every job's outputs in order and hands jobs with a checkpoint (or a Do
// reply) to the second, which writes the key records and marker, then the
// commit. That keeps the checkpoint protocol's order — every output taken
// before a checkpoint is written before its marker, and the marker before
// its commit — while outputs taken after a checkpoint do not wait for its
// key records: a checkpoint rewrites every changed key, which takes far
// longer than a flush, and predictions would wait behind it
// (BenchmarkLatency's p99 with checkpoints on and off). Each step is retried
// in place with the Runner's backoff.
//
// The first step that fails for good ends the write-behind: jobs after it are
// not written (their Do callers get the error), and the loop, which watches
// failed, ends the partition. Nothing the loop handed over is lost by that:
// what was not written is replayed from the last marker, as after a crash;
// outputs the first stage wrote past that marker are written again then
// (at-least-once output).
type writeBehind struct {
	r    *Runner
	jobs chan job // to the outputs stage
	// ckpts hands jobs from the outputs stage to the checkpoint stage,
	// unbuffered: outputs run at most one checkpoint ahead of the last
	// marker written, so a failure replays at most two intervals.
	ckpts  chan job
	failed chan struct{} // closed after err is set
	err    error
	fail1  sync.Once
	done   chan struct{} // closed when both stages have ended
	ctx    context.Context
	cancel context.CancelFunc
	close  sync.Once // of jobs
}

// job is one unit of the write-behind: outputs, then, when ckpt is set, a
// checkpoint and its commit.
type job struct {
	outs  []Output
	ckpt  *pendingCheckpoint
	reply chan error // answered after the job (Runner.Do); may be nil
}

// pendingCheckpoint is a checkpoint taken by the loop and not yet written.
type pendingCheckpoint struct {
	batch CheckpointBatch
	next  [2]int64 // the input offsets to commit after the marker
	keys  KeyCount // keys the worker held when it was taken
	taken time.Time
}

// writeBehindDepth bounds the jobs waiting to be written: the partition loop
// waits when the broker falls this far behind (backpressure), so outputs and
// encoded checkpoints held in memory stay bounded.
const writeBehindDepth = 4

// startWriteBehind starts the stages. Their writes outlive ctx's end (a stop
// arriving during a checkpoint does not cut it in half), each bounded by the
// retry timeout plus FinalTimeout; abort cuts them short.
func (r *Runner) startWriteBehind(ctx context.Context) *writeBehind {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	wb := &writeBehind{r: r, jobs: make(chan job, writeBehindDepth), ckpts: make(chan job),
		failed: make(chan struct{}), done: make(chan struct{}), ctx: wctx, cancel: cancel}
	checkpointsDone := make(chan struct{})
	go func() {
		defer close(wb.done)
		wb.outputs()
		<-checkpointsDone
	}()
	go func() {
		defer close(checkpointsDone)
		wb.checkpoints()
	}()
	return wb
}

// fail records the write-behind's first failure.
func (wb *writeBehind) fail(err error) {
	wb.fail1.Do(func() {
		wb.err = err
		close(wb.failed)
	})
}

// failure is the write-behind's failure, nil while it has none.
func (wb *writeBehind) failure() error {
	select {
	case <-wb.failed:
		return wb.err
	default:
		return nil
	}
}

// outputs is the first stage.
func (wb *writeBehind) outputs() {
	defer close(wb.ckpts)
	for j := range wb.jobs {
		err := wb.failure()
		if err == nil {
			if err = wb.writeOutputs(j.outs); err != nil {
				wb.fail(err)
			}
		}
		switch {
		case err != nil: // failed now or before: answer, write nothing more
			if j.reply != nil {
				j.reply <- err
			}
		case j.ckpt != nil || j.reply != nil:
			wb.ckpts <- j // waits while the checkpoint stage writes the one before
		}
	}
}

// checkpoints is the second stage.
func (wb *writeBehind) checkpoints() {
	for j := range wb.ckpts {
		err := wb.failure()
		if err == nil && j.ckpt != nil {
			if err = wb.writeCheckpoint(j.ckpt); err != nil {
				wb.fail(err)
			}
		}
		if j.reply != nil {
			j.reply <- err
		}
	}
}

// writeOutputs writes one job's outputs, retried in place.
func (wb *writeBehind) writeOutputs(outs []Output) error {
	if len(outs) == 0 {
		return nil
	}
	r := wb.r
	ctx, cancel := context.WithTimeout(wb.ctx, r.cfg.Retry.Timeout+r.cfg.FinalTimeout)
	defer cancel()
	return r.do(ctx, StepSink, func(ctx context.Context) error { return r.cfg.Sink.Write(ctx, outs) })
}

// writeCheckpoint writes a checkpoint's key records and marker, then its
// commit, each retried on its own, so that a retried commit does not write
// the checkpoint again.
func (wb *writeBehind) writeCheckpoint(c *pendingCheckpoint) error {
	r := wb.r
	ctx, cancel := context.WithTimeout(wb.ctx, r.cfg.Retry.Timeout+r.cfg.FinalTimeout)
	defer cancel()
	if err := r.do(ctx, StepStore, func(ctx context.Context) error {
		if err := r.cfg.Store.Write(ctx, c.batch.Keys, c.batch.Marker); err != nil {
			return fmt.Errorf("checkpoint partition %d: %w", r.cfg.Partition, err)
		}
		return nil
	}); err != nil {
		return err
	}
	if r.cfg.Committer != nil {
		if err := r.do(ctx, StepCommit, func(ctx context.Context) error { return r.cfg.Committer.Commit(ctx, c.next) }); err != nil {
			return err
		}
	}
	r.pub.keys(c.keys)
	for _, h := range r.hooks.checkpointed {
		h.Checkpointed(len(c.batch.Keys), c.batch.Bytes, c.keys, time.Since(c.taken))
	}
	return nil
}

// put hands a job over, waiting while the write-behind is writeBehindDepth
// jobs behind; it returns the write-behind's error once it has failed.
func (wb *writeBehind) put(j job) error {
	select {
	case wb.jobs <- j:
		return nil
	case <-wb.failed:
		return wb.err
	}
}

// drain writes what was handed over and ends the goroutine, waiting at most
// timeout; it returns the first failure.
func (wb *writeBehind) drain(timeout time.Duration) error {
	wb.close.Do(func() { close(wb.jobs) })
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-wb.done:
		return wb.err
	case <-t.C:
		wb.cancel()
		<-wb.done
		return fmt.Errorf("outputs and checkpoint not written within %s", timeout)
	}
}

// abort cuts the writes in flight short and ends the goroutine: a stop that
// writes nothing more, as a crash would. It is a no-op after drain.
func (wb *writeBehind) abort() {
	wb.cancel()
	wb.close.Do(func() { close(wb.jobs) })
	<-wb.done
}
