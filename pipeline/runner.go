package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
)

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	Partition int
	Pipeline  Config
	Store     checkpoint.Store
	Open      Opener
	Sink      Sink
	// Committer may be nil (backtests commit nothing).
	Committer Committer
	// Generation is the consumer-group generation the partition was assigned
	// in (0 outside a group); it breaks ties between epochs.
	Generation int32
	// Owner names this member in its ownership record.
	Owner string
	// Committed are the group's committed offsets: outputs for records below
	// them were delivered before and are not repeated.
	Committed [2]int64
	// CheckpointEvery checkpoints after this many of the partition's own
	// records (other partitions' records, read for a shared part across
	// partitions, do not count), or after
	// CheckpointPeriod, whichever comes first.
	CheckpointEvery  int
	CheckpointPeriod time.Duration
	// CheckpointMaxEvery, when above CheckpointEvery, lets a checkpoint
	// due by the count wait while it would write more key records than one
	// for every RecordsPerKeyRecord records it absorbs — each event a key
	// of its own, a record per event — up to this many records;
	// CheckpointPeriod bounds it in time all the same. With a key store
	// it waits only while fewer than CacheKeys + CheckpointEvery keys are
	// held in memory (changed keys stay there until a checkpoint writes
	// them), the bound without a wait. 0 (or
	// CheckpointEvery): a checkpoint every CheckpointEvery records.
	CheckpointMaxEvery int
	// FlushInterval, when positive, writes the outputs so far this often,
	// between checkpoints, so that a prediction is readable within about
	// this long instead of at the next checkpoint. The protocol only needs
	// outputs written before the marker, so this changes no guarantee: a
	// crash repeats at most two checkpoint intervals of outputs (the
	// write-behind's outputs run at most one checkpoint ahead of the marker
	// being written).
	FlushInterval time.Duration
	// FinalTimeout bounds the checkpoint written when the partition is
	// revoked or the service stops.
	FinalTimeout time.Duration
	Retry        Backoff
	// Hooks hear of the Runner's events (Hook).
	Hooks  []Hook
	Logger *slog.Logger
	// Kept, when set, is the state this process kept from its last Runner of
	// the partition (Runner.Kept). The Runner resumes from it without a
	// restore when the store shows nothing was written to the partition
	// since; otherwise it restores as usual (and closes the kept state).
	Kept *Kept
	// KeyStore, when set, holds the partition's keys beyond the CacheKeys
	// kept in memory (Worker.UseKeyStore). Once NewRunner returns, the
	// Runner owns the store: it closes it when Run returns, unless the state
	// is kept (then Kept.Close does), and at once when it resumes from Kept,
	// whose own store it uses instead.
	KeyStore  KeyStore
	CacheKeys int
	// CloseTimeout bounds the closing of the partition's key store when
	// Run returns (default DefaultCloseTimeout): on a hung disk, closing
	// and removing a store blocks for as long as the disk does, and Run
	// returns its result (a failure published, a stop within the shutdown
	// timeout) without waiting for it; the store is left to the process's
	// end.
	CloseTimeout time.Duration
}

// Defaults of RunnerConfig's timeouts.
const (
	// DefaultCloseTimeout is RunnerConfig.CloseTimeout's default.
	DefaultCloseTimeout = 5 * time.Second
	// DefaultFinalTimeout is RunnerConfig.FinalTimeout's default.
	DefaultFinalTimeout = 30 * time.Second
)

// Runner is the partition loop of docs/spec/DESIGN.md §4, the one that the service, the
// backtest and the demo all run: restore the partition's keys, claim the
// partition under a new epoch, read from the replay start, process, and
// checkpoint — flush outputs, write key records and marker, commit offsets —
// every CheckpointEvery records or CheckpointPeriod, and once more when ctx
// ends (revocation, shutdown) or the source is exhausted. The writes run on
// a write-behind goroutine, in that order, while the loop goes on
// processing; the loop waits only when it is writeBehindDepth jobs behind.
//
// Failure semantics:
//   - A bad record is a dead letter, never an error.
//   - A retriable error (IsRetriable) of the store, sink, committer or
//     source is retried in place with Backoff: the step is repeated (a source
//     is reopened after the last processed offset), nothing is processed
//     twice and outputs already written are not written again.
//   - ErrLost (the generation ended) stops the partition at once, without
//     error and without writing anything more.
//   - A permanent error, or a retriable one still failing after
//     Backoff.Timeout, ends Run with a *PartitionError. The Runner never
//     restarts itself: the caller decides what ends the process.
//   - A failed write ends the partition once the loop sees it: records it
//     processed meanwhile are not written, and replay from the last marker,
//     as after a crash.
//   - When ctx ends, the final checkpoint runs detached from ctx, and the
//     write-behind gets FinalTimeout to write what it holds; records fetched
//     but not processed are left to the next owner, which resumes after the
//     marker.
type Runner struct {
	cfg     RunnerConfig
	w       *Worker
	log     *slog.Logger
	pos     *positions // nil when the store reports no positions
	kept    *Kept      // set by a clean stop
	reqs    chan request
	stopped chan struct{} // closed when Run returns
	hooks   hooks
	pub     *published
	retries retryLog
	// strict is set when the partition is rebuilt from its inputs: its
	// sources must read every record (From.Strict).
	strict bool
	// rewrite is set when the restore set torn or fenced records aside
	// (Restored.Rewrite): their keys are checkpointed before the first
	// record is processed.
	rewrite bool
}

// request is work for the partition's goroutine (Runner.Do).
type request struct {
	fn    func(*Worker) (changed bool)
	reply chan error
}

// Do runs fn on the partition's own goroutine, between two records, so that
// fn may read and change the worker without locks. When fn reports a change,
// the Runner checkpoints before Do returns, so that a restore — after a
// crash, or on another member — starts from the changed state; a failed
// checkpoint is Do's error (and the partition's). Do waits while the
// partition restores, and returns ErrNotRunning once Run has returned.
func (r *Runner) Do(ctx context.Context, fn func(w *Worker) (changed bool)) error {
	q := request{fn: fn, reply: make(chan error, 1)}
	select {
	case r.reqs <- q:
	case <-r.stopped:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-q.reply:
		return err
	case <-ctx.Done():
		return fmt.Errorf("applied; its checkpoint is still being written: %w", ctx.Err())
	}
}

// NewRunner validates the configuration.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	switch {
	case cfg.Store == nil || cfg.Open == nil || cfg.Sink == nil:
		return nil, errors.New("runner: store, source opener and sink are required")
	case cfg.CheckpointEvery < 1 || cfg.CheckpointPeriod <= 0:
		return nil, fmt.Errorf("runner: checkpoint every %d records or %s: both must be positive", cfg.CheckpointEvery, cfg.CheckpointPeriod)
	case cfg.CheckpointMaxEvery != 0 && cfg.CheckpointMaxEvery < cfg.CheckpointEvery:
		return nil, fmt.Errorf("runner: checkpoint at most every %d records, fewer than every %d: the most must be 0 or at least the checkpoint interval", cfg.CheckpointMaxEvery, cfg.CheckpointEvery)
	}
	if cfg.CheckpointMaxEvery == 0 {
		cfg.CheckpointMaxEvery = cfg.CheckpointEvery
	}
	if cfg.Retry == (Backoff{}) {
		cfg.Retry = DefaultBackoff
	}
	if cfg.Retry.Initial <= 0 || cfg.Retry.Max < cfg.Retry.Initial || cfg.Retry.Timeout <= 0 {
		return nil, fmt.Errorf("runner: backoff %+v: need 0 < initial ≤ max and a positive timeout", cfg.Retry)
	}
	if cfg.FinalTimeout <= 0 {
		cfg.FinalTimeout = DefaultFinalTimeout
	}
	if cfg.CloseTimeout <= 0 {
		cfg.CloseTimeout = DefaultCloseTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Kept != nil && cfg.Kept.w.partition != cfg.Partition {
		return nil, fmt.Errorf("runner: state kept from partition %d given to partition %d", cfg.Kept.w.partition, cfg.Partition)
	}
	w, err := NewWorker(cfg.Pipeline, cfg.Partition)
	if err != nil {
		return nil, err
	}
	if cfg.KeyStore != nil {
		if err := w.UseKeyStore(cfg.KeyStore, cfg.CacheKeys); err != nil {
			return nil, err
		}
	}
	r := &Runner{cfg: cfg, w: w, log: cfg.Logger.With("partition", cfg.Partition), reqs: make(chan request), stopped: make(chan struct{}),
		hooks: sortHooks(cfg.Hooks), pub: newPublished()}
	if ps, ok := cfg.Store.(PositionedStore); ok {
		r.pos = &positions{PositionedStore: ps}
		r.cfg.Store = r.pos
	}
	return r, nil
}

// Snapshot returns the partition's counters and gauges as published after
// the last record processed. It is safe to call from any goroutine, at any
// time: before Run, it is the zero Snapshot.
func (r *Runner) Snapshot() Snapshot { return r.pub.get() }

// Kept returns the partition's state after Run stopped cleanly — ctx ended,
// final checkpoint written and committed — for the partition's next Runner
// in this process (RunnerConfig.Kept); nil otherwise, or when the store
// reports no positions.
func (r *Runner) Kept() *Kept { return r.kept }

// Run runs the partition until ctx ends or the source is exhausted. It
// returns nil then, and when ownership is lost; a *PartitionError when the
// partition failed.
func (r *Runner) Run(ctx context.Context) error {
	defer close(r.stopped)
	r.pub.phase(PhaseRestoring)
	err := r.stop(ctx, r.run(ctx))
	if err != nil {
		r.pub.phase(PhaseFailed)
	} else {
		r.pub.phase(PhaseStopped)
	}
	return err
}

// stop releases what run leaves and turns its error into Run's: nil for a
// stop (ctx ended, ownership lost), a *PartitionError for a failure.
func (r *Runner) stop(ctx context.Context, err error) error {
	if r.kept == nil {
		r.closeKeys()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrLost):
		r.log.Info("partition ownership lost; stopped without writing more", "reason", err)
		return nil
	case ctx.Err() != nil && !errors.As(err, new(finalError)):
		// Stopped (revoked, shut down) while restoring, claiming or backing
		// off: nothing to checkpoint yet, and the error is the stop's (a
		// dial cut short, a wait abandoned). The next owner starts over.
		r.log.Info("partition stopped while restoring, claiming or retrying; its next owner starts from the last checkpoint", "reason", err)
		return nil
	}
	var pe *PartitionError
	switch {
	case errors.As(err, &pe): // its own step (the sink's, the store's…)
	case IsFinal(err):
		err = &PartitionError{Partition: r.cfg.Partition, Step: StepFinal, Err: err}
	default:
		err = r.stepError(StepProcess, err)
	}
	return err
}

// closeKeys closes the worker's key store, waiting at most CloseTimeout:
// a store on a hung disk blocks in its close or in removing its files for
// as long as the disk does, and the partition's result must not wait for it.
func (r *Runner) closeKeys() {
	done := make(chan error, 1)
	go func() { done <- r.w.Close() }()
	t := time.NewTimer(r.cfg.CloseTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			r.log.Warn("closing the partition's key store", "err", err)
		}
	case <-t.C:
		r.log.Error("the partition's key store did not close in time (a hung disk?); it is left open to the process's end",
			"timeout", r.cfg.CloseTimeout.String(), "dir_note", "stores left in DRIFTSTREAM_STATE_DIR are removed at the next start")
	}
}

// claim writes the ownership record of epoch e.
func (r *Runner) claim(ctx context.Context, e checkpoint.Epoch) error {
	return r.do(ctx, StepClaim, func(ctx context.Context) error {
		return r.cfg.Store.Claim(ctx, checkpoint.Ownership{Partition: r.cfg.Partition, Epoch: e, Owner: r.cfg.Owner})
	})
}

func (r *Runner) run(ctx context.Context) error {
	if err := r.start(ctx); err != nil {
		return err
	}
	l := &loop{r: r, pctx: context.WithoutCancel(ctx)} // a record once taken is processed whole
	if err := r.do(ctx, StepSource, l.open); err != nil {
		return err
	}
	defer func() { l.src.Close() }()
	l.wb = r.startWriteBehind(ctx)
	defer l.wb.abort() // a no-op after the final drain
	// A checkpoint comes CheckpointPeriod after the last one at the
	// latest while records arrive: the ticker restarts at every checkpoint.
	l.tick = time.NewTicker(r.cfg.CheckpointPeriod)
	defer l.tick.Stop()
	// Torn and fenced records stay in the changelog until their keys are
	// written again; the cleaner may meanwhile remove the accepted records
	// they follow (then only a rebuild restores the partition). Written
	// again at once.
	if r.rewrite {
		r.rewrite = false
		if err := l.checkpoint(nil); err != nil {
			return err
		}
	}
	var flushC <-chan time.Time
	if r.cfg.FlushInterval > 0 {
		flush := time.NewTicker(r.cfg.FlushInterval)
		defer flush.Stop()
		flushC = flush.C
	}
	for {
		if ctx.Err() != nil { // stop before taking another record
			return l.final()
		}
		select {
		case <-ctx.Done():
			return l.final()
		case <-l.wb.failed:
			return l.wb.err
		case batch, ok := <-l.src.Records():
			if !ok { // exhausted
				return l.final()
			}
			if stop, err := l.take(ctx, batch); stop {
				return err
			}
		case <-l.tick.C:
			if l.since > 0 {
				if err := l.checkpoint(nil); err != nil {
					return err
				}
			}
		case <-flushC:
			if len(r.w.out) > 0 {
				if err := l.wb.put(job{outs: r.w.TakeOutputs()}); err != nil {
					return err
				}
			}
		case q := <-r.reqs:
			if !q.fn(r.w) {
				q.reply <- nil
				continue
			}
			if err := l.checkpoint(q.reply); err != nil {
				q.reply <- err
				return err
			}
		}
	}
}

// start brings the partition's state to where it resumes: taken from the
// last Runner's kept state when it is current, else restored from the
// store under a new epoch, claimed; then publishes it.
func (r *Runner) start(ctx context.Context) error {
	start := time.Now()
	res, resumed, err := r.resume(ctx)
	if err != nil {
		return err
	}
	r.cfg.Kept = nil // taken, or stale
	if resumed {
		for _, p := range res.Problems {
			r.log.Warn("checkpoint record set aside while catching up; its key replays from further back", "problem", p)
		}
	} else if res, err = r.restore(ctx); err != nil {
		return err
	}
	r.rewrite = res.Rewrite && res.Origin != FromInputs
	for _, t := range res.Torn {
		r.log.Warn("torn checkpoint set aside: its writer stopped before its marker; its keys keep their records of the checkpoint before and are written again at the next checkpoint",
			"epoch", t.Epoch.String(), "first", t.First, "last", t.Last, "records", t.Records, "keys", len(t.Keys))
	}
	committed := [2]int64{max(r.cfg.Committed[0], 0), max(r.cfg.Committed[1], 0)}
	r.w.SuppressBelow(committed)
	r.pub.start(r.w, res)
	for _, h := range r.hooks.restored {
		h.Restored(res, r.w.keyCount(), time.Since(start))
	}
	r.log.Info("partition restored", "keys", r.w.Keys(), "from", res.Origin.String(), "caught_up_records", res.CaughtUp, "replay_from", res.From[0], "committed", committed[0],
		"epoch", r.w.epoch.String(), "verified", res.Verified, "fenced_records", res.Fenced, "torn_records", res.TornRecords(), "changelog_records", res.Read, "restore_ms", time.Since(start).Milliseconds())
	return nil
}

// restore reads the partition's state from the store, checks it reaches
// the committed position, and claims a new epoch for it. The state must be
// the log's as of the claim: a restore that left out records written
// between the end of its read and its claim (a former owner's last
// checkpoint, a newer owner's claim) would resume another state than the
// one later readers of the log see, so, when anything came between, the
// partition is read again up to and including the claim (claimed.go).
func (r *Runner) restore(ctx context.Context) (res Restored, err error) {
	load := loadFunc(r.cfg.Store.Load)
	var inexact *inexactError
	for {
		err = r.do(ctx, StepRestore, func(ctx context.Context) error {
			var err error
			res, err = r.w.restoreWith(ctx, load)
			if inexact = nil; errors.As(err, &inexact) {
				res, err = inexact.res, nil // rebuilt from the inputs (rebuild.go)
			}
			return err
		})
		if err != nil {
			return res, err
		}
		if inexact == nil {
			if err := res.complete(r.cfg.Partition, r.cfg.Committed[EventsTopic]); err != nil {
				return res, r.stepError(StepRestore, err)
			}
		}
		if r.w.epoch != 0 && res.Owner != nil && res.Owner.Epoch == r.w.epoch {
			break // read again through this Runner's claim, which stands
		}
		if err := r.checkGeneration(ctx, res.Owner); err != nil {
			return res, err
		}
		r.w.SetEpoch(checkpoint.NextEpoch(res.MaxEpoch, r.cfg.Generation))
		if err := r.claim(ctx, r.w.epoch); err != nil {
			return res, err
		}
		if r.pos == nil || r.pos.end-1 == res.End {
			break // nothing came between (or a store that is the process's own)
		}
		claimedAt := r.pos.end - 1
		r.log.Info("checkpoint records came between the restore's read and its claim: reading the partition again, up to the claim",
			"read_until", res.End, "claimed_at", claimedAt, "epoch", r.w.epoch.String())
		epoch := r.w.epoch
		if r.w, err = r.freshWorker(); err != nil {
			return res, err
		}
		r.w.SetEpoch(epoch)
		load = func(ctx context.Context, p int, sink checkpoint.KeySink) (checkpoint.Snapshot, error) {
			return r.pos.LoadUntil(ctx, p, claimedAt+1, sink)
		}
	}
	if inexact != nil {
		r.log.Warn("the changelog cannot restore the partition exactly: rebuilding it from its input topics' first records (it fails if retention deleted any)",
			"err", inexact.Error())
		for _, p := range res.Problems {
			r.log.Warn("checkpoint record that cannot be used", "problem", p)
		}
		epoch := r.w.epoch
		if r.w, err = r.freshWorker(); err != nil {
			return res, err
		}
		r.w.SetEpoch(epoch)
		r.strict = true
		res.Origin, res.Marker, res.From, res.Mismatch = FromInputs, nil, r.w.Next(), inexact.mismatch != nil
		return res, nil
	}
	for _, p := range res.Problems {
		r.log.Warn("checkpoint record set aside; its key replays from further back", "problem", p)
	}
	return res, nil
}

// loop is the state of a Runner's record loop: its source, its
// write-behind, the records since the last checkpoint and the current
// streak of source failures.
type loop struct {
	r     *Runner
	pctx  context.Context // the records' context: a record once taken is processed whole
	src   Source
	wb    *writeBehind
	tick  *time.Ticker
	since int // records processed since the last checkpoint
	// failingSince is the source's first failure of the current streak,
	// attempt its retries.
	failingSince time.Time
	attempt      int
}

// open opens the source at the worker's next record of each topic.
func (l *loop) open(ctx context.Context) error {
	src, err := l.r.cfg.Open(ctx, From{Topics: l.r.w.Next(), Peers: l.r.w.Peers(), Strict: l.r.strict})
	if err == nil {
		l.src = src // a failed open keeps the last one, closed, for the deferred Close
	}
	return err
}

// take processes a batch from the source, checkpointing every
// CheckpointEvery records; a failed fetch reopens the source after a
// backoff. stop reports that the loop ends, with err (nil: a clean stop,
// its final checkpoint written).
func (l *loop) take(ctx context.Context, batch []Fetched) (stop bool, err error) {
	r := l.r
	for i := range batch {
		f := &batch[i]
		if f.Err != nil {
			return l.reopen(ctx, f.Err)
		}
		if i > 0 && ctx.Err() != nil { // stop before taking another record
			return true, l.final()
		}
		l.failingSince = time.Time{}
		b := countsOf(&r.w.stats)
		if err := r.w.Process(l.pctx, f.Record); err != nil {
			return true, r.stepError(StepProcess, err)
		}
		topic := f.Topic
		if f.Partition != r.cfg.Partition {
			topic = peerInput // its lag is its own partition's
		}
		e := r.pub.record(r.w, b, topic, max(0, f.HighWatermark-f.Offset-1))
		for _, h := range r.hooks.record {
			h.Record(f, e)
		}
		if topic == peerInput {
			continue // the interval counts the partition's own records
		}
		if l.since++; l.due() {
			if err := l.checkpoint(nil); err != nil {
				return true, err
			}
		}
	}
	return false, nil
}

// reopen closes the source after its failure err and opens it again after
// a backoff; a lost position (ErrLost) and retries past the limit end the
// loop, a cancelled context stops it cleanly.
func (l *loop) reopen(ctx context.Context, err error) (stop bool, _ error) {
	r := l.r
	l.src.Close()
	if errors.Is(err, ErrLost) {
		return true, err
	}
	if l.failingSince.IsZero() {
		l.failingSince, l.attempt = time.Now(), 0
	}
	if err := r.backoff(ctx, StepSource, err, &l.attempt, l.failingSince); err != nil {
		if ctx.Err() != nil {
			return true, l.final()
		}
		return true, err
	}
	if err := r.do(ctx, StepSource, l.open); err != nil {
		if ctx.Err() != nil {
			return true, l.final()
		}
		return true, err
	}
	return false, nil
}

// RecordsPerKeyRecord is how many records a checkpoint absorbs, at least,
// for each key record it writes, when it may wait for more
// (RunnerConfig.CheckpointMaxEvery): a key record costs about what
// processing a record does, and the wait bounds their share.
const RecordsPerKeyRecord = 4

// due reports whether the records since the last checkpoint call for one
// (RunnerConfig.CheckpointEvery, CheckpointMaxEvery).
func (l *loop) due() bool {
	return l.r.w.checkpointDue(l.since, l.r.cfg.CheckpointEvery, l.r.cfg.CheckpointMaxEvery)
}

// checkpointDue reports whether since records processed after the last
// checkpoint call for one, at a checkpoint every records that may wait
// for up to maxEvery (RunnerConfig.CheckpointMaxEvery).
func (w *Worker) checkpointDue(since, every, maxEvery int) bool {
	switch {
	case since < every:
		return false
	case since >= maxEvery:
		return true
	}
	if c := w.cache; c != nil && len(w.keys) >= c.max+every {
		return true // the changed keys held in memory beyond the cache's bound
	}
	return len(w.dirty)*RecordsPerKeyRecord <= since
}

// checkpoint checkpoints the partition (reply, when set, gets the outcome)
// and restarts the count and the period.
func (l *loop) checkpoint(reply chan error) error {
	if err := l.r.checkpoint(l.wb, reply); err != nil {
		return err
	}
	l.since = 0
	l.tick.Reset(l.r.cfg.CheckpointPeriod) // the period counts from the last checkpoint
	return nil
}

// final stops the loop cleanly (Runner.final).
func (l *loop) final() error { return l.r.final(l.wb, l.since) }

// final writes the last checkpoint when the partition stops, waits for the
// write-behind to write everything, and keeps the state for the partition's
// next Runner when the store reports positions.
func (r *Runner) final(wb *writeBehind, since int) error {
	r.pub.phase(PhaseStopping)
	if since > 0 || len(r.w.out) > 0 {
		if err := r.checkpoint(wb, nil); err != nil {
			return finalError{err} // run's deferred abort stops the write-behind
		}
	}
	if err := wb.drain(r.cfg.FinalTimeout); err != nil {
		return finalError{err}
	}
	if r.pos != nil && r.pos.known {
		r.kept = &Kept{w: r.w, end: r.pos.end, epoch: r.w.epoch}
	}
	return nil
}

// checkpoint takes the outputs so far and a checkpoint of the worker, and
// hands them to the write-behind, which writes the outputs, the key records
// and marker, and commits, in that order; reply, when set, gets the result.
func (r *Runner) checkpoint(wb *writeBehind, reply chan error) error {
	batch, err := r.w.TakeCheckpoint()
	if err != nil {
		return r.stepError(StepStore, err)
	}
	t := r.w.Through()
	next := [2]int64{-1, -1}
	for i := range t {
		if t[i] >= 0 {
			next[i] = t[i] + 1
		}
	}
	return wb.put(job{outs: r.w.TakeOutputs(), ckpt: &pendingCheckpoint{batch: batch, next: next, keys: r.w.keyCount(), taken: time.Now()}, reply: reply})
}
