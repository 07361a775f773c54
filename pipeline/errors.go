package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

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
// Retriable, a timeout, a refused or reset connection, an unexpected EOF,
// an error that says it is temporary (as kafka-go's broker error codes do),
// or one of the two answers of a broker coming back that kafka-go does not
// call temporary:
//   - protocol.ErrNoLeader: kafka-go's metadata cache names no leader for a
//     partition (leader -1 while a broker restarts), a client-side error
//     without a Temporary method; the cache refreshes within its TTL.
//   - kafka.BrokerNotAvailable: what a broker answers (DescribeConfigs, on
//     Apache Kafka 4.4.0) while it comes back from a stop.
//
// Both ended partitions in a 12 s broker stop before they were listed here.
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
	case errors.Is(err, protocol.ErrNoLeader), errors.Is(err, kafka.BrokerNotAvailable):
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

// ErrNotRunning is Runner.Do's answer when the partition is not processing
// records: it stopped, or has not started.
var ErrNotRunning = errors.New("partition is not running")

// IsFinal reports whether err is a failure of the last checkpoint written
// when the partition stopped (its outputs, key records or commit not
// written within FinalTimeout). Nothing is lost then: the partition's next
// owner replays from the last checkpoint written; after a revocation (the
// broker unreachable past the session timeout) it is not the partition's
// failure.
func IsFinal(err error) bool { return errors.As(err, new(finalError)) }

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
