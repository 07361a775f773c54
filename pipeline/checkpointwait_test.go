package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
)

// markerLog is a memory store (a checkpoint.Store only, not positioned)
// that notes, for each checkpoint written, the events-topic offset it runs
// through and its number of key records.
type markerLog struct {
	checkpoint.Store
	mu      sync.Mutex
	through []int64
	keys    []int
}

func (s *markerLog) Write(ctx context.Context, keys []checkpoint.KeyRecord, m checkpoint.Marker) error {
	s.mu.Lock()
	s.through, s.keys = append(s.through, m.Through[EventsTopic]), append(s.keys, len(keys))
	s.mu.Unlock()
	return s.Store.Write(ctx, keys, m)
}

// labeledEvents is n labeled events, the i-th of key keyOf(i).
func labeledEvents(n int, keyOf func(i int) string) []Record {
	out := make([]Record, n)
	for i := range out {
		y := 1 - 2*(i%2)
		out[i] = Record{Offset: int64(i), Key: []byte(keyOf(i)),
			Value: fmt.Appendf(nil, `{"id":"e%d","x":[%d,1,0.5,-1],"label":%d}`, i, y, y)}
	}
	return out
}

// A checkpoint due by the count waits, up to CheckpointMaxEvery records,
// while it would write more than one key record for every
// RecordsPerKeyRecord records it absorbs; with a key store, no longer than
// until CheckpointEvery keys beyond the cache's bound are held.
func TestCheckpointWaitsWhileItWouldWriteAKeyPerRecord(t *testing.T) {
	const every, n = 100, 2000
	for _, c := range []struct {
		name      string
		maxEvery  int
		cacheKeys int // with a key store holding this many keys in memory
		keyOf     func(i int) string
		through   []int64 // the events-topic offset each checkpoint runs through
	}{
		// No wait: every 100 records, whatever they change.
		{"no wait", 0, 0, func(i int) string { return fmt.Sprint("k", i) }, counted(every, n)},
		{"max equal to every", every, 0, func(i int) string { return fmt.Sprint("k", i) }, counted(every, n)},
		// One key: a key record absorbs 100 records.
		{"one key", 10 * every, 0, func(int) string { return "k" }, counted(every, n)},
		// 50 keys in turn: 50 key records need 200 records.
		{"50 keys", 10 * every, 0, func(i int) string { return fmt.Sprint("k", i%50) }, counted(4*50, n)},
		// 30 keys: 120 records.
		{"30 keys", 10 * every, 0, func(i int) string { return fmt.Sprint("k", i%30) }, counted(4*30, n)},
		// A key per record: the most, 1,000, or 500.
		{"a key per record", 10 * every, 0, func(i int) string { return fmt.Sprint("k", i) }, counted(10*every, n)},
		{"a key per record, most 500", 5 * every, 0, func(i int) string { return fmt.Sprint("k", i) }, counted(5*every, n)},
		// With a key store of 150 keys in memory: 250 keys held at most,
		// so the first checkpoint at 250 records, then every 100 (the
		// cache holds 150 clean keys after each); with 50 keys in turn
		// the cache holds them all and the wait is as without it.
		{"key store", 10 * every, 150, func(i int) string { return fmt.Sprint("k", i) }, stepped(249, every, n)},
		{"key store, 50 keys", 10 * every, 150, func(i int) string { return fmt.Sprint("k", i%50) }, counted(4*50, n)},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := &markerLog{Store: checkpoint.NewMemoryStore()}
			f := &feed{recs: labeledEvents(n, c.keyOf), bounded: true}
			cfg := RunnerConfig{Partition: 0, Pipeline: testConfig(t, "perceptron", ""), Store: store, Open: f.opener(newGate(1 << 62)),
				Sink: &testSink{out: newOutputs()}, Committer: &testCommitter{}, Generation: 1, Owner: "a",
				CheckpointEvery: every, CheckpointMaxEvery: c.maxEvery, CheckpointPeriod: time.Hour, FinalTimeout: 5 * time.Second}
			if c.cacheKeys > 0 {
				cfg.KeyStore, cfg.CacheKeys = newTestKeys(t), c.cacheKeys
			}
			r, err := NewRunner(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			through := store.through
			if last := through[len(through)-1]; last == n-1 && !slices.Contains(c.through, last) {
				through = through[:len(through)-1] // the final checkpoint at the end of the feed
			}
			if !slices.Equal(through, c.through) {
				t.Fatalf("checkpoints through %v (key records %v), want through %v", through, store.keys, c.through)
			}
		})
	}
}

// counted is the offsets a checkpoint every k of n records runs through.
func counted(k, n int) []int64 { return stepped(int64(k-1), k, n) }

// stepped is the offsets from first, k apart, below n.
func stepped(first int64, k, n int) []int64 {
	var out []int64
	for off := first; off < int64(n); off += int64(k) {
		out = append(out, off)
	}
	return out
}

// A CheckpointMaxEvery below CheckpointEvery is refused.
func TestCheckpointMaxEveryBelowEveryIsRefused(t *testing.T) {
	_, err := NewRunner(RunnerConfig{Partition: 0, Pipeline: testConfig(t, "perceptron", ""), Store: checkpoint.NewMemoryStore(),
		Open: (&feed{}).opener(newGate(0)), Sink: &testSink{out: newOutputs()}, CheckpointEvery: 100, CheckpointMaxEvery: 99, CheckpointPeriod: time.Hour})
	if err == nil || err.Error() != "runner: checkpoint at most every 99 records, fewer than every 100: the most must be 0 or at least the checkpoint interval" {
		t.Fatalf("err %v", err)
	}
}
