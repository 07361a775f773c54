package backtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/pipeline"
)

// Input is a partitioned history: one bounded record source per partition.
type Input interface {
	// Partitions lists the partitions to replay.
	Partitions() []int
	// Open starts partition p's records at offsets from (per input topic);
	// its channel closes at the end of the history.
	Open(ctx context.Context, p int, from pipeline.From) (pipeline.Source, error)
	// Total is the number of records in all, or −1 when unknown.
	Total() int64
	// Err reports a failure of the input after its sources closed.
	Err() error
}

// peerReader is an Input that can deal each partition the other
// partitions' records too, in one order: a shared part
// across partitions (keyed.Settings.SharedAcrossPartitions).
type peerReader interface {
	// readPeers switches it on, before the first Open.
	readPeers() error
}

// ReplayConfig configures a replay.
type ReplayConfig struct {
	// Name labels the progress lines and the report.
	Name     string
	Pipeline pipeline.Config
	// CheckpointEvery checkpoints each partition (in memory) every this many
	// records, as the service does; 0 means 1000.
	CheckpointEvery int
	// Outputs, when set, receives every partition's outputs in order, from
	// that partition's goroutine, at each checkpoint.
	Outputs func(partition int, outs []pipeline.Output) error
	// Progress receives a line every ProgressEvery (records, rate, ETA when
	// the total is known); nil is quiet.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Observe, when set, follows every record of every partition with what
	// it did to the counters, from the partition's goroutine (curves).
	Observe func(partition int, f *pipeline.Fetched, e pipeline.Effect)
}

// Replay replays in through one pipeline.Runner per partition, concurrently,
// and reports what the service would have done: its counters, per key.
func Replay(ctx context.Context, cfg ReplayConfig, in Input) (*Report, error) {
	if err := cfg.Pipeline.Validate(); err != nil {
		return nil, err
	}
	cfg.Pipeline = cfg.Pipeline.WithDefaults()
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = 1000
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Pipeline.SharedAcrossPartitions {
		pr, ok := in.(peerReader)
		if !ok {
			return nil, fmt.Errorf("replay %s: a shared part across partitions reads the other partitions' events, which this input does not deal (a keyed file, a generated stream or a topic range does; two files do not)", cfg.Name)
		}
		if err := pr.readPeers(); err != nil {
			return nil, fmt.Errorf("replay %s: %w", cfg.Name, err)
		}
	}
	parts := in.Partitions()
	scorers := make([]*scorer, len(parts))
	runners := make([]*pipeline.Runner, len(parts))
	var done atomic.Int64
	for i, p := range parts {
		scorers[i] = &scorer{keys: map[string]*KeyStats{}, done: &done, partition: p, observe: cfg.Observe}
		r, err := pipeline.NewRunner(pipeline.RunnerConfig{Partition: p, Pipeline: cfg.Pipeline, Store: checkpoint.NewMemoryStore(),
			Open: func(ctx context.Context, from pipeline.From) (pipeline.Source, error) { return in.Open(ctx, p, from) },
			Sink: &sink{partition: p, outputs: cfg.Outputs, counts: &scorers[i].outputs}, CheckpointEvery: cfg.CheckpointEvery,
			CheckpointPeriod: time.Hour, Hooks: []pipeline.Hook{scorers[i]}, Logger: slog.New(slog.DiscardHandler),
			Retry: pipeline.Backoff{Initial: 10 * time.Millisecond, Max: time.Second, Timeout: 30 * time.Second}})
		if err != nil {
			return nil, err
		}
		runners[i] = r
	}
	start := time.Now()
	stopProgress := progress(ctx, cfg, in.Total(), &done, start)
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = r.Run(ctx); errs[i] != nil {
				cancel() // one partition failed: stop the others and the input
			}
		}()
	}
	wg.Wait()
	stopProgress()
	if err := errors.Join(append(errs, in.Err())...); err != nil {
		return nil, fmt.Errorf("replay %s: %w", cfg.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("replay %s: %w", cfg.Name, err)
	}
	rep := newReport(cfg, scorers, runners, done.Load(), time.Since(start))
	return rep, nil
}

// progress prints a line every cfg.ProgressEvery until stopped.
func progress(ctx context.Context, cfg ReplayConfig, total int64, done *atomic.Int64, start time.Time) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				n := done.Load()
				rate := float64(n) / time.Since(start).Seconds()
				line := fmt.Sprintf("%s: %d records, %.0f/s", cfg.Name, n, rate)
				if total > 0 && rate > 0 {
					eta := time.Duration(float64(total-n) / rate * float64(time.Second))
					line += fmt.Sprintf(", %.1f%%, ETA %s", 100*float64(n)/float64(total), eta.Round(time.Second))
				}
				fmt.Fprintln(cfg.Progress, line)
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// sink counts a partition's outputs and hands them on.
type sink struct {
	partition int
	outputs   func(int, []pipeline.Output) error
	counts    *OutputCounts
}

// OutputCounts count the outputs a replay wrote, by topic (in
// summary.json's order, as it was written when they were a map).
type OutputCounts struct {
	DeadLetters int64 `json:"dead_letters"`
	Queries     int64 `json:"label_queries"`
	Predictions int64 `json:"predictions"`
}

func (s *sink) Write(_ context.Context, outs []pipeline.Output) error {
	for _, o := range outs {
		switch o.Kind {
		case pipeline.OutPrediction:
			s.counts.Predictions++
		case pipeline.OutQuery:
			s.counts.Queries++
		case pipeline.OutDeadLetter:
			s.counts.DeadLetters++
		}
	}
	if s.outputs != nil {
		return s.outputs(s.partition, outs)
	}
	return nil
}

// scorer is a partition's RecordHook: it attributes each record's effect
// on the counters to the record's key.
type scorer struct {
	keys      map[string]*KeyStats
	outputs   OutputCounts
	done      *atomic.Int64
	partition int
	observe   func(int, *pipeline.Fetched, pipeline.Effect)
	// timed are the scored outcomes whose event had a time, for the
	// accuracy-over-time curve.
	timed []timedOutcome
}

type timedOutcome struct {
	at    int64 // Unix nanoseconds
	wrong bool
}

// Record attributes a record's effect to its key.
func (s *scorer) Record(f *pipeline.Fetched, e pipeline.Effect) {
	if f.Partition != s.partition {
		return // another partition's, for the shared part: counted by its own
	}
	s.done.Add(1)
	if s.observe != nil {
		s.observe(s.partition, f, e)
	}
	if e.Labeled > 0 && !e.Outcome.Time.IsZero() {
		s.timed = append(s.timed, timedOutcome{at: e.Outcome.Time.UnixNano(), wrong: e.Outcome.Wrong})
	}
	if e.Events == 0 && e.Labeled == 0 && e.Queries == 0 && e.Alerts == 0 {
		return // a label record that scored nothing, a dead letter, a skip
	}
	k, ok := s.keys[string(f.Key)]
	if !ok {
		k = &KeyStats{Key: string(f.Key), Partition: s.partition}
		s.keys[k.Key] = k
	}
	k.Events += e.Events
	k.Labeled += e.Labeled
	k.Mistakes += e.Mistakes
	k.Queries += e.Queries
	k.Alerts += e.Alerts
}
