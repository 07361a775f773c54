package kafkatest

import (
	"bytes"
	"sync"
)

// LogBuffer is a log that a test reads while the code under test (a
// service's goroutines, a process's output) still writes it: a
// bytes.Buffer behind a lock. The zero value is ready to use.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
