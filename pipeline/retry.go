package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// retryLogEvery is the least time between two "retrying" warnings of one
// partition: an outage makes every step retry several times a second, and
// the hooks and metrics count every attempt.
const retryLogEvery = 10 * time.Second

// retryLog rate-limits a partition's "retrying" warnings (its steps retry
// on the partition goroutine and the write-behind's).
type retryLog struct {
	mu      sync.Mutex
	last    time.Time
	skipped int
}

// allow reports whether a warning may be logged at now, and how many were
// skipped since the last one.
func (l *retryLog) allow(now time.Time) (skipped int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < retryLogEvery {
		l.skipped++
		return 0, false
	}
	skipped, l.skipped, l.last = l.skipped, 0, now
	return skipped, true
}

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
	if n, ok := r.retries.allow(time.Now()); ok {
		r.log.Warn("retrying", "step", string(step), "attempt", *attempt, "wait", wait.String(), "error", err, "retries_not_logged", n)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return &PartitionError{Partition: r.cfg.Partition, Step: step, Err: fmt.Errorf("%w; last error: %v", ctx.Err(), err)}
	case <-t.C:
		return nil
	}
}
