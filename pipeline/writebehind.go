package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// writeBehind writes a partition's outputs and checkpoints on a goroutine of
// its own, in the order the partition loop hands them over, so that the loop
// goes on processing while a write waits for the broker. The order is the
// checkpoint protocol's: every output taken before a checkpoint is written
// before its key records and marker, and those before its commit. Each step
// is retried in place with the Runner's backoff, as the loop did before.
//
// The first step that fails for good ends the write-behind: jobs after it are
// not written (their Do callers get the error), and the loop, which watches
// failed, ends the partition. Nothing the loop handed over is lost by that:
// what was not written is replayed from the last marker, as after a crash.
type writeBehind struct {
	r      *Runner
	jobs   chan job
	failed chan struct{} // closed after err is set
	err    error
	done   chan struct{} // closed when the goroutine has ended
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
	keys  int      // keys the worker held when it was taken
	taken time.Time
}

// writeBehindDepth bounds the jobs waiting to be written: the partition loop
// waits when the broker falls this far behind (backpressure), so outputs and
// encoded checkpoints held in memory stay bounded.
const writeBehindDepth = 4

// startWriteBehind starts the goroutine. Its writes outlive ctx's end (a stop
// arriving during a checkpoint does not cut it in half), each bounded by the
// retry timeout plus FinalTimeout; abort cuts them short.
func (r *Runner) startWriteBehind(ctx context.Context) *writeBehind {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	wb := &writeBehind{r: r, jobs: make(chan job, writeBehindDepth), failed: make(chan struct{}), done: make(chan struct{}), ctx: wctx, cancel: cancel}
	go wb.loop()
	return wb
}

func (wb *writeBehind) loop() {
	defer close(wb.done)
	for j := range wb.jobs {
		if wb.err != nil { // failed before: answer, write nothing more
			if j.reply != nil {
				j.reply <- wb.err
			}
			continue
		}
		err := wb.write(j)
		if j.reply != nil {
			j.reply <- err
		}
		if err != nil {
			wb.err = err
			close(wb.failed)
		}
	}
}

// write runs one job's steps in order, each retried on its own, so that a
// retried store write does not write the outputs again.
func (wb *writeBehind) write(j job) error {
	r := wb.r
	ctx, cancel := context.WithTimeout(wb.ctx, r.cfg.Retry.Timeout+r.cfg.FinalTimeout)
	defer cancel()
	if len(j.outs) > 0 {
		if err := r.do(ctx, StepSink, func(ctx context.Context) error { return r.cfg.Sink.Write(ctx, j.outs) }); err != nil {
			return err
		}
	}
	c := j.ckpt
	if c == nil {
		return nil
	}
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
	r.cfg.Observer.Checkpointed(len(c.batch.Keys), c.batch.Bytes, c.keys, time.Since(c.taken))
	return nil
}

// put hands a job over, waiting while the write-behind is writebehindDepth
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
