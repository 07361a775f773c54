// Package poll is the tests' one way to wait for a condition that another
// goroutine or process makes true: poll it, and fail the test with what was
// awaited once a deadline passes. A test that can be told of the event
// itself (a channel, a hook) should wait on that instead.
package poll

import (
	"testing"
	"time"
)

// Every is how often Until checks its condition.
const Every = 2 * time.Millisecond

// Until checks cond every Every until it reports true, and fails t with
// describe's text once timeout has passed without it.
func Until(t testing.TB, timeout time.Duration, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, describe())
		}
		time.Sleep(Every)
	}
}

// Text is a describe function for Until that returns s.
func Text(s string) func() string { return func() string { return s } }
