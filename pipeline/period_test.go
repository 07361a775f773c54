package pipeline

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
)

// checkpointTimes records when each checkpoint was written.
type checkpointTimes struct {
	mu    sync.Mutex
	times []time.Time
}

func (c *checkpointTimes) Checkpointed(int, int, KeyCount, time.Duration) {
	c.mu.Lock()
	c.times = append(c.times, time.Now())
	c.mu.Unlock()
}

// While records arrive, checkpoints come CheckpointPeriod apart: the
// period counts from the last checkpoint (it came every second interval
// when the ticker and the checkpoint's own time raced).
func TestCheckpointPeriodCountsFromTheLastCheckpoint(t *testing.T) {
	const interval = 40 * time.Millisecond
	recs := records(4, 600, 5)
	open := func(ctx context.Context, start From) (Source, error) {
		from := start.Topics
		ctx, cancel := context.WithCancel(ctx)
		s := &gatedSource{ch: make(chan []Fetched, 1), cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(s.done)
			for _, r := range recs[from[EventsTopic]:] {
				select {
				case s.ch <- []Fetched{{Record: r}}:
				case <-ctx.Done():
					return
				}
				time.Sleep(2 * time.Millisecond) // a steady stream
			}
			close(s.ch)
		}()
		return s, nil
	}
	obs := &checkpointTimes{}
	r, err := NewRunner(RunnerConfig{Partition: 0, Pipeline: testConfig(t, "perceptron", ""), Store: checkpoint.NewMemoryStore(), Open: open,
		Sink: &testSink{out: newOutputs()}, Committer: &testCommitter{}, Generation: 1, Owner: "a", CheckpointEvery: 1 << 30,
		CheckpointPeriod: interval, FinalTimeout: 5 * time.Second, Hooks: []Hook{obs}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var gaps []time.Duration
	for i := 1; i < len(obs.times)-1; i++ { // the last is the final checkpoint
		gaps = append(gaps, obs.times[i].Sub(obs.times[i-1]))
	}
	if len(gaps) < 5 {
		t.Fatalf("%d checkpoints over %d records", len(obs.times), len(recs))
	}
	slices.Sort(gaps)
	if median := gaps[len(gaps)/2]; median > interval*3/2 {
		t.Fatalf("checkpoints a median %s apart (gaps %v), want about %s", median, gaps, interval)
	}
}
