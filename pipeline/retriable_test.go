package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// Network errors that a failover or a healed network cures are retried, and
// a broker's answers while it comes back; errors about the data or the
// configuration are not. Each network error is
// wrapped as a dial or read failure wraps it (net.OpError, os.SyscallError).
func TestIsRetriable(t *testing.T) {
	dial := func(errno syscall.Errno) error {
		return fmt.Errorf("read events/3: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)})
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"ECONNREFUSED", dial(syscall.ECONNREFUSED), true},
		{"ECONNRESET", dial(syscall.ECONNRESET), true},
		{"EHOSTUNREACH", dial(syscall.EHOSTUNREACH), true},
		{"ENETUNREACH", dial(syscall.ENETUNREACH), true},
		{"ENETDOWN", dial(syscall.ENETDOWN), true},
		{"ECONNABORTED", dial(syscall.ECONNABORTED), true},
		{"EHOSTDOWN", dial(syscall.EHOSTDOWN), true},
		{"ETIMEDOUT", dial(syscall.ETIMEDOUT), true},
		{"EPIPE", dial(syscall.EPIPE), true},
		{"unexpected EOF", fmt.Errorf("fetch: %w", io.ErrUnexpectedEOF), true},
		{"deadline", context.DeadlineExceeded, true},
		{"EACCES", dial(syscall.EACCES), false},
		{"ENOSPC", fmt.Errorf("key store: %w", syscall.ENOSPC), false},
		{"cancelled", context.Canceled, false},
		{"lost", fmt.Errorf("commit: %w", ErrLost), false},
		{"invalid event", topics.ErrInvalid, false},
		{"plain", errors.New("boom"), false},
		{"no leader in kafka-go's metadata", fmt.Errorf("partition 1: kafka.(*Client).Produce: %w", protocol.NewErrNoLeader("out", 1)), true},
		{"broker not available", fmt.Errorf("describe changelog: %w", kafka.BrokerNotAvailable), true},
		{"leader not available", kafka.LeaderNotAvailable, true},
		{"topic authorization failed", kafka.TopicAuthorizationFailed, false},
		{"no such topic in kafka-go's metadata", protocol.NewErrNoTopic("out"), false},
	} {
		if got := IsRetriable(tc.err); got != tc.want {
			t.Errorf("%s: IsRetriable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// An outage's retries are logged at most once per retryLogEvery, each
// warning counting the attempts not logged since the last.
func TestRetryWarningsAreRateLimited(t *testing.T) {
	var l retryLog
	t0 := time.Unix(1000, 0)
	logged := 0
	var skipped []int
	for i := range 100 { // 5 attempts a second for 20 s
		if n, ok := l.allow(t0.Add(time.Duration(i) * 200 * time.Millisecond)); ok {
			logged++
			skipped = append(skipped, n)
		}
	}
	if logged != 2 || skipped[0] != 0 || skipped[1] != 49 {
		t.Fatalf("%d warnings for 100 retries over 20 s (skipped %v), want 2 (0 and 49 skipped)", logged, skipped)
	}
}
