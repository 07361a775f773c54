// Package sourcetest is the conformance suite of pipeline.Source: every
// implementation (the service's Kafka readers, the backtests' topic ranges
// and in-memory histories) runs Run against records of its own making, as
// watermill's pub/sub implementations run its shared tests. A Source that
// passes delivers what the Runner's exactly-once state rests on.
package sourcetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/driftstream/driftstream/pipeline"
)

// Subject is a Source implementation under test.
type Subject struct {
	// New makes a fresh input holding n records on partition 0 of the
	// events topic (index 0) and, with Labels, n/5 on the labels topic
	// (index 1), each topic's offsets consecutive from 0; it returns what
	// it wrote, per topic in offset order, and an opener of partition 0.
	New func(t *testing.T, n int) (written [2][]pipeline.Record, open func(from [2]int64) pipeline.Source)
	// Bounded is true for sources that close their channel after the last
	// record (a history); false for those that follow a live topic.
	Bounded bool
	// Labels is true when the source reads the labels topic too.
	Labels bool
	// Merged is true when the source merges its two topics by record
	// timestamp (pipeline.Merge): of records written before it opened, it
	// delivers them in an order whose timestamps never go back.
	Merged bool
}

// timeout bounds every wait of the suite.
const timeout = 30 * time.Second

// Run runs the suite on s.
func Run(t *testing.T, s Subject) {
	t.Run("every record once in offset order", func(t *testing.T) {
		written, open := s.New(t, 500)
		check(t, s, open, written, [2]int64{0, 0})
	})
	t.Run("from offsets", func(t *testing.T) {
		written, open := s.New(t, 500)
		check(t, s, open, written, [2]int64{123, 40})
	})
	t.Run("close stops it", func(t *testing.T) {
		_, open := s.New(t, 500)
		src := open([2]int64{0, 0})
		select {
		case <-src.Records():
		case <-time.After(timeout):
			t.Fatal("no batch")
		}
		closed := make(chan error, 1)
		go func() { closed <- src.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("Close: %v", err)
			}
		case <-time.After(timeout):
			t.Fatal("Close did not return with records unread: its goroutines block on the channel")
		}
	})
}

// check opens the source at from and asserts that it delivers exactly the
// records written from there on: in offset order per topic, each once,
// with their keys and values, on partition 0 — and, for a bounded source,
// nothing more before its channel closes.
func check(t *testing.T, s Subject, open func([2]int64) pipeline.Source, written [2][]pipeline.Record, from [2]int64) {
	t.Helper()
	src := open(from)
	defer src.Close()
	want := [2]int{len(written[0]) - int(from[0]), 0}
	if s.Labels {
		want[1] = len(written[1]) - int(from[1])
	}
	next := from
	got := [2]int{}
	var last time.Time // the last record's timestamp (Merged)
	deadline := time.After(timeout)
	for got != want || s.Bounded {
		select {
		case batch, ok := <-src.Records():
			if !ok {
				if !s.Bounded {
					t.Fatal("a source that follows a topic closed its channel")
				}
				if got != want {
					t.Fatalf("channel closed after %v records, want %v", got, want)
				}
				return
			}
			if len(batch) == 0 {
				t.Fatal("an empty batch")
			}
			for _, f := range batch {
				if f.Err != nil {
					t.Fatalf("read error: %v", f.Err)
				}
				i := f.Topic // EventsTopic 0, LabelsTopic 1
				if f.Partition != 0 || f.Offset != next[i] || got[i] >= want[i] {
					t.Fatalf("topic %d: record at partition %d offset %d; want partition 0 offset %d (%d of %d delivered)", i, f.Partition, f.Offset, next[i], got[i], want[i])
				}
				w := written[i][f.Offset]
				if !bytes.Equal(f.Key, w.Key) || !bytes.Equal(f.Value, w.Value) {
					t.Fatalf("topic %d offset %d: key %q value %q, written %q %q", i, f.Offset, f.Key, f.Value, w.Key, w.Value)
				}
				if s.Merged && f.Time.Before(last) {
					t.Fatalf("topic %d offset %d: timestamp %s after one of %s: the topics are not merged by time", i, f.Offset, f.Time, last)
				}
				last = f.Time
				next[i]++
				got[i]++
			}
		case <-deadline:
			t.Fatalf("%v records delivered after %s, want %v", got, timeout, want)
		}
	}
}
