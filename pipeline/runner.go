package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
)

// Source delivers one partition's input records.
type Source interface {
	// Records delivers records in batches (what one fetch returned, say), in
	// offset order per input topic: one channel operation per batch rather
	// than per record. It is closed when a bounded input (a file, a topic
	// range) is exhausted. A Fetched with Err set reports a failed read; it
	// ends its batch and nothing follows it.
	Records() <-chan []Fetched
	// Close stops the source and waits for its goroutines.
	Close() error
}

// Fetched is a record read by a Source, or its read error.
type Fetched struct {
	Record
	// HighWatermark is the partition's end offset when the record was read
	// (0 when unknown), for lag.
	HighWatermark int64
	Err           error
}

// Opener opens a partition's source at offsets from (per input topic).
type Opener func(ctx context.Context, from [2]int64) (Source, error)

// Sink writes outputs to where they are read (output topics, a report).
type Sink interface {
	// Write returns once every output is durable.
	Write(ctx context.Context, outs []Output) error
}

// Committer records the input offsets a partition has checkpointed through
// (a consumer group's committed offsets); outputs below them are not
// repeated after a restart.
type Committer interface {
	// Commit records next, the offset to read next per input topic (−1 for a
	// topic with nothing to commit).
	Commit(ctx context.Context, next [2]int64) error
}

// ErrLost is returned (wrapped) by a Source, Sink, Committer or Store when the
// partition is no longer this member's (its group generation ended). The
// Runner stops without writing anything more and without failing: the new
// owner takes over from the last checkpoint.
var ErrLost = errors.New("partition ownership lost")

// retriable marks an error that the Runner retries in place.
type retriable struct{ error }

func (r retriable) Unwrap() error { return r.error }

// Retriable marks err as worth retrying in place (a leader change, a timeout,
// a reset connection).
func Retriable(err error) error {
	if err == nil {
		return nil
	}
	return retriable{err}
}

// IsRetriable reports whether err is worth retrying in place: marked with
// Retriable, a timeout, a refused or reset connection, an unexpected EOF, or
// an error that says it is temporary (as Kafka protocol errors do).
func IsRetriable(err error) bool {
	var r retriable
	var tmp interface{ Temporary() bool }
	var ne net.Error
	switch {
	case err == nil || errors.Is(err, ErrLost) || errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &r):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ENETDOWN),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EHOSTDOWN), errors.Is(err, syscall.ETIMEDOUT):
		// The network between here and a broker: a failover or a healed
		// partition cures them (Kafka moves a partition's leadership in
		// seconds), so they are retried for the retry timeout like a refused
		// connection.
		return true
	case errors.As(err, &tmp):
		return tmp.Temporary()
	}
	return false
}

// Step names a stage of the partition loop, in errors and metrics.
type Step string

// The steps of the partition loop.
const (
	StepRestore Step = "restore"
	StepClaim   Step = "claim"
	StepSource  Step = "source"
	StepProcess Step = "process"
	StepSink    Step = "sink"
	StepStore   Step = "store"
	StepCommit  Step = "commit"
	// StepKeyStore is the partition's on-disk key store (a full or hung
	// disk, a damaged table), whichever step met its failure.
	StepKeyStore Step = "key_store"
	// StepFinal is the last checkpoint of a stopping partition, when it
	// failed for want of time rather than at one step.
	StepFinal Step = "final"
)

// Steps are every Step, in loop order.
var Steps = []Step{StepRestore, StepClaim, StepSource, StepProcess, StepSink, StepStore, StepCommit, StepKeyStore, StepFinal}

// PartitionError ends a partition: a permanent error, or a retriable one
// that persisted past the retry bound.
type PartitionError struct {
	Partition int
	Step      Step
	Err       error
}

func (e *PartitionError) Error() string {
	return fmt.Sprintf("partition %d failed at %s: %v", e.Partition, e.Step, e.Err)
}

func (e *PartitionError) Unwrap() error { return e.Err }

// Backoff is the retry policy of the Runner: capped exponential backoff with
// full jitter, for at most Timeout per failing step.
type Backoff struct {
	Initial, Max time.Duration
	// Timeout bounds how long one step keeps failing before the partition
	// fails.
	Timeout time.Duration
}

// DefaultBackoff retries from 100 ms up to 5 s between attempts, for 2 min.
var DefaultBackoff = Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Timeout: 2 * time.Minute}

// Hook is anything that wants to hear of a Runner's events (the service's
// metrics, a backtest's scorer): a value implementing any of RestoredHook,
// RecordHook, CheckpointedHook and RetryingHook, whose methods the Runner
// calls; the rest it is not told of. Counters need no hook: Runner.Snapshot
// reads them at any time.
type Hook any

// RestoredHook hears once per Run that the partition was restored or
// resumed, from the partition's goroutine.
type RestoredHook interface {
	Restored(res Restored, keys KeyCount, took time.Duration)
}

// RecordHook hears of every record processed, from the partition's
// goroutine, with what it did to the counters.
type RecordHook interface {
	Record(f *Fetched, e Effect)
}

// CheckpointedHook hears of every checkpoint committed, from the
// partition's write-behind goroutine.
type CheckpointedHook interface {
	Checkpointed(records, bytes int, keys KeyCount, took time.Duration)
}

// RetryingHook hears of every retriable error about to be retried, from
// the partition's goroutine or its write-behind's.
type RetryingHook interface {
	Retrying(step Step, err error, attempt int, wait time.Duration)
}

// hooks are a Runner's hooks, sorted by the events they hear of.
type hooks struct {
	restored     []RestoredHook
	record       []RecordHook
	checkpointed []CheckpointedHook
	retrying     []RetryingHook
}

func sortHooks(hs []Hook) hooks {
	var h hooks
	for _, x := range hs {
		if x, ok := x.(RestoredHook); ok {
			h.restored = append(h.restored, x)
		}
		if x, ok := x.(RecordHook); ok {
			h.record = append(h.record, x)
		}
		if x, ok := x.(CheckpointedHook); ok {
			h.checkpointed = append(h.checkpointed, x)
		}
		if x, ok := x.(RetryingHook); ok {
			h.retrying = append(h.retrying, x)
		}
	}
	return h
}

// KeyCount is how many keys a partition holds, and how many of them are in
// memory: fewer than Keys only with a key store (UseKeyStore), which holds
// the rest on disk.
type KeyCount struct{ Keys, Resident int }

func (w *Worker) keyCount() KeyCount { return KeyCount{Keys: w.Keys(), Resident: w.Resident()} }

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
	// CheckpointEvery checkpoints after this many records, or after
	// CheckpointInterval, whichever comes first.
	CheckpointEvery    int
	CheckpointInterval time.Duration
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
}

// PositionedStore is a Store that reports where its records land in a
// partition's log (checkpoint.KafkaStore and MemoryStore do). With it, a
// partition that stays with its member across a rebalance keeps its
// in-memory state instead of restoring it.
type PositionedStore interface {
	checkpoint.Store
	// ClaimAt is Claim, returning the ownership record's position.
	ClaimAt(ctx context.Context, o checkpoint.Ownership) (int64, error)
	// WriteAt is Write, returning the position after the marker.
	WriteAt(ctx context.Context, keys []checkpoint.KeyRecord, m checkpoint.Marker) (int64, error)
	// LoadRange absorbs the records at positions [from, to) into snap, a
	// snapshot from checkpoint.Resume: a kept state catching up.
	LoadRange(ctx context.Context, partition int, from, to int64, snap *checkpoint.Snapshot) error
}

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

// Runner is the partition loop of DESIGN §4, the one that the service, the
// backtest and the demo all run: restore the partition's keys, claim the
// partition under a new epoch, read from the replay start, process, and
// checkpoint — flush outputs, write key records and marker, commit offsets —
// every CheckpointEvery records or CheckpointInterval, and once more when ctx
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
}

// request is work for the partition's goroutine (Runner.Do).
type request struct {
	fn    func(*Worker) (changed bool)
	reply chan error
}

// ErrNotRunning is Runner.Do's answer when the partition is not processing
// records: it stopped, or has not started.
var ErrNotRunning = errors.New("partition is not running")

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
	case cfg.CheckpointEvery < 1 || cfg.CheckpointInterval <= 0:
		return nil, fmt.Errorf("runner: checkpoint every %d records or %s: both must be positive", cfg.CheckpointEvery, cfg.CheckpointInterval)
	}
	if cfg.Retry == (Backoff{}) {
		cfg.Retry = DefaultBackoff
	}
	if cfg.Retry.Initial <= 0 || cfg.Retry.Max < cfg.Retry.Initial || cfg.Retry.Timeout <= 0 {
		return nil, fmt.Errorf("runner: backoff %+v: need 0 < initial ≤ max and a positive timeout", cfg.Retry)
	}
	if cfg.FinalTimeout <= 0 {
		cfg.FinalTimeout = 30 * time.Second
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

// Worker is the runner's worker, for reading its counters after Run.
func (r *Runner) Worker() *Worker { return r.w }

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
	err := r.run(ctx)
	if r.kept == nil {
		if cerr := r.w.Close(); cerr != nil {
			r.log.Warn("closing the partition's key store", "err", cerr)
		}
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

// IsFinal reports whether err is a failure of the last checkpoint written
// when the partition stopped (its outputs, key records or commit not
// written within FinalTimeout). Nothing is lost then: the partition's next
// owner replays from the last checkpoint written; after a revocation (the
// broker unreachable past the session timeout) it is not the partition's
// failure.
func IsFinal(err error) bool { return errors.As(err, new(finalError)) }

// claim writes the ownership record of epoch e.
func (r *Runner) claim(ctx context.Context, e checkpoint.Epoch) error {
	return r.do(ctx, StepClaim, func(ctx context.Context) error {
		return r.cfg.Store.Claim(ctx, checkpoint.Ownership{Partition: r.cfg.Partition, Epoch: e, Owner: r.cfg.Owner})
	})
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
	t := r.w.Through()
	return Restored{From: [2]int64{t[0] + 1, t[1] + 1}, MaxEpoch: epoch, Resumed: true, Unparked: k.parked}, true, nil
}

func (r *Runner) run(ctx context.Context) error {
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
	} else {
		err := r.do(ctx, StepRestore, func(ctx context.Context) error {
			var err error
			res, err = r.w.Restore(ctx, r.cfg.Store)
			return err
		})
		if err != nil {
			return err
		}
		if err := res.complete(r.cfg.Partition, r.cfg.Committed[EventsTopic]); err != nil {
			return r.stepError(StepRestore, err)
		}
		for _, p := range res.Problems {
			r.log.Warn("checkpoint record set aside; its key replays from further back", "problem", p)
		}
		r.w.SetEpoch(checkpoint.NextEpoch(res.MaxEpoch, r.cfg.Generation))
		if err := r.claim(ctx, r.w.epoch); err != nil {
			return err
		}
	}
	committed := [2]int64{max(r.cfg.Committed[0], 0), max(r.cfg.Committed[1], 0)}
	r.w.SuppressBelow(committed)
	r.pub.start(r.w, res)
	for _, h := range r.hooks.restored {
		h.Restored(res, r.w.keyCount(), time.Since(start))
	}
	r.log.Info("partition restored", "keys", r.w.Keys(), "resumed_from_memory", resumed && !res.Unparked, "resumed_from_parked", res.Unparked, "caught_up_records", res.CaughtUp, "replay_from", res.From[0], "committed", committed[0],
		"epoch", r.w.epoch.String(), "fenced_records", res.Fenced, "restore_ms", time.Since(start).Milliseconds())

	var src Source
	open := func(ctx context.Context) error {
		t := r.w.Through()
		var err error
		src, err = r.cfg.Open(ctx, [2]int64{t[0] + 1, t[1] + 1})
		return err
	}
	if err := r.do(ctx, StepSource, open); err != nil {
		return err
	}
	defer func() { src.Close() }()

	wb := r.startWriteBehind(ctx)
	defer wb.abort()                   // a no-op after the final drain
	pctx := context.WithoutCancel(ctx) // a record once taken is processed whole
	since := 0
	// A checkpoint comes CheckpointInterval after the last one at the
	// latest while records arrive: the ticker restarts at every checkpoint.
	tick := time.NewTicker(r.cfg.CheckpointInterval)
	defer tick.Stop()
	var flushC <-chan time.Time
	if r.cfg.FlushInterval > 0 {
		flush := time.NewTicker(r.cfg.FlushInterval)
		defer flush.Stop()
		flushC = flush.C
	}
	var failingSince time.Time // the source's first failure of the current streak
	attempt := 0
	for {
		if ctx.Err() != nil { // stop before taking another record
			return r.final(wb, since)
		}
		select {
		case <-ctx.Done():
			return r.final(wb, since)
		case <-wb.failed:
			return wb.err
		case batch, ok := <-src.Records():
			if !ok { // exhausted
				return r.final(wb, since)
			}
			for i := range batch {
				f := &batch[i]
				if f.Err != nil {
					src.Close()
					if errors.Is(f.Err, ErrLost) {
						return f.Err
					}
					if failingSince.IsZero() {
						failingSince, attempt = time.Now(), 0
					}
					if err := r.backoff(ctx, StepSource, f.Err, &attempt, failingSince); err != nil {
						if ctx.Err() != nil {
							return r.final(wb, since)
						}
						return err
					}
					if err := r.do(ctx, StepSource, open); err != nil {
						if ctx.Err() != nil {
							return r.final(wb, since)
						}
						return err
					}
					break
				}
				if i > 0 && ctx.Err() != nil { // stop before taking another record
					return r.final(wb, since)
				}
				failingSince = time.Time{}
				b := countsOf(&r.w.stats)
				if err := r.w.Process(pctx, f.Record); err != nil {
					return r.stepError(StepProcess, err)
				}
				e := r.pub.record(r.w, b, f.Topic, max(0, f.HighWatermark-f.Offset-1))
				for _, h := range r.hooks.record {
					h.Record(f, e)
				}
				if since++; since >= r.cfg.CheckpointEvery {
					if err := r.checkpoint(wb, nil); err != nil {
						return err
					}
					since = 0
					tick.Reset(r.cfg.CheckpointInterval) // the period counts from the last checkpoint
				}
			}
		case <-tick.C:
			if since > 0 {
				if err := r.checkpoint(wb, nil); err != nil {
					return err
				}
				since = 0
			}
		case <-flushC:
			if len(r.w.out) > 0 {
				if err := wb.put(job{outs: r.w.TakeOutputs()}); err != nil {
					return err
				}
			}
		case q := <-r.reqs:
			if !q.fn(r.w) {
				q.reply <- nil
				continue
			}
			if err := r.checkpoint(wb, q.reply); err != nil {
				q.reply <- err
				return err
			}
			since = 0
			tick.Reset(r.cfg.CheckpointInterval)
		}
	}
}

// final writes the last checkpoint when the partition stops, waits for the
// write-behind to write everything, and keeps the state for the partition's
// next Runner when the store reports positions.
func (r *Runner) final(wb *writeBehind, since int) error {
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

// finalError is a failure of the last checkpoint: a failure even though ctx
// has ended.
type finalError struct{ error }

func (e finalError) Unwrap() error { return e.error }

// keyStoreError is an error of the worker's key store (KeyStore).
type keyStoreError struct{ error }

func (e keyStoreError) Unwrap() error { return e.error }

// stepError ends the partition at step, or at StepKeyStore when the key
// store is what failed.
func (r *Runner) stepError(step Step, err error) *PartitionError {
	var ke keyStoreError
	if errors.As(err, &ke) {
		step = StepKeyStore
	}
	return &PartitionError{Partition: r.cfg.Partition, Step: step, Err: err}
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

// do runs fn until it succeeds, retrying retriable errors with backoff for
// at most Retry.Timeout.
func (r *Runner) do(ctx context.Context, step Step, fn func(context.Context) error) error {
	first := time.Now()
	for attempt := 0; ; {
		err := fn(ctx)
		if err == nil || errors.Is(err, ErrLost) {
			return err
		}
		if err := r.backoff(ctx, step, err, &attempt, first); err != nil {
			return err
		}
	}
}

// backoff waits before the next attempt at a failing step, or returns the
// error that ends the partition: err itself when it is permanent, a
// *PartitionError when the step has been failing for longer than
// Retry.Timeout, ctx's error when ctx ends first.
func (r *Runner) backoff(ctx context.Context, step Step, err error, attempt *int, since time.Time) error {
	if ctx.Err() != nil {
		return &PartitionError{Partition: r.cfg.Partition, Step: step, Err: fmt.Errorf("%w; last error: %v", ctx.Err(), err)}
	}
	if !IsRetriable(err) {
		return &PartitionError{Partition: r.cfg.Partition, Step: step, Err: err}
	}
	if time.Since(since) > r.cfg.Retry.Timeout {
		return &PartitionError{Partition: r.cfg.Partition, Step: step,
			Err: fmt.Errorf("still failing after %s of retries: %w", r.cfg.Retry.Timeout.Round(time.Millisecond), err)}
	}
	ceil := r.cfg.Retry.Initial << min(*attempt, 30)
	if ceil <= 0 || ceil > r.cfg.Retry.Max {
		ceil = r.cfg.Retry.Max
	}
	wait := r.cfg.Retry.Initial/2 + time.Duration(rand.Int64N(int64(ceil))) // full jitter above a floor
	*attempt++
	for _, h := range r.hooks.retrying {
		h.Retrying(step, err, *attempt, wait)
	}
	r.log.Warn("retrying", "step", string(step), "attempt", *attempt, "wait", wait.String(), "error", err)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return &PartitionError{Partition: r.cfg.Partition, Step: step, Err: fmt.Errorf("%w; last error: %v", ctx.Err(), err)}
	case <-t.C:
		return nil
	}
}
