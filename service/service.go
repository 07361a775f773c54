// Package service runs driftstream on Kafka (DESIGN.md §1, §4): a consumer
// group whose generations assign partitions; for each assigned partition one
// goroutine owns a pipeline.Worker, restores it from the checkpoint store,
// replays, processes, and follows the checkpoint protocol — flush outputs,
// write key records and marker, commit offsets — and checkpoints
// synchronously when the partition is revoked or the service stops.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
)

// errCommit marks a refused offset commit.
var errCommit = errors.New("offset commit failed")

// Topics names the topics the service reads and writes.
type Topics struct {
	Events, Labels                    string // Labels is optional
	Predictions, Queries, DeadLetters string
	Changelog                         string
}

// Config configures a service.
type Config struct {
	Brokers []string
	// Dialer carries TLS and SASL settings; nil dials plainly.
	Dialer *kafka.Dialer
	// Transport is the writers' transport (TLS, SASL); nil is plain.
	Transport *kafka.Transport
	Group     string
	Topics    Topics
	// Partitions and Replication are used when topics must be created.
	Partitions, Replication int
	Pipeline                pipeline.Config
	// Store keeps checkpoints; nil means the Kafka changelog topic.
	Store checkpoint.Store
	// CheckpointEvery checkpoints a partition after this many records, or
	// after CheckpointInterval, whichever comes first.
	CheckpointEvery    int
	CheckpointInterval time.Duration
	Logger             *slog.Logger
	// Metrics, when set, receives the service's Prometheus metrics.
	Metrics *Metrics
}

// Totals are the service's counters, summed over partitions.
type Totals struct {
	Events, Predictions, Queries, Labeled, Mistakes, LabelsJoined, DeadLetters int64
}

// Service is a running driftstream consumer.
type Service struct {
	cfg     Config
	store   checkpoint.Store
	writers map[string]*kafka.Writer
	log     *slog.Logger

	events, predictions, queries, labeled, mistakes, joined, dead atomic.Int64
	assigned                                                      sync.Map // partition → restored (bool)
	lag                                                           sync.Map // partition → *atomic.Int64

	// crashed makes partitions stop without their final checkpoint, as a
	// killed process would: the tests' stand-in for kill -9.
	crashed atomic.Bool
}

// New validates the configuration, creates missing topics (the changelog
// compacted), and checks that the labels topic is co-partitioned with the
// events topic.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if len(cfg.Brokers) == 0 || cfg.Group == "" || cfg.Topics.Events == "" {
		return nil, errors.New("brokers, group and events topic are required")
	}
	if err := cfg.Pipeline.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dialer == nil {
		cfg.Dialer = &kafka.Dialer{Timeout: 10 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = 1000
	}
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = 5 * time.Second
	}
	cfg.Partitions = max(cfg.Partitions, 1)
	cfg.Replication = max(cfg.Replication, 1)
	s := &Service{cfg: cfg, log: cfg.Logger, writers: map[string]*kafka.Writer{}}
	if err := s.ensureTopics(ctx); err != nil {
		return nil, err
	}
	s.store = cfg.Store
	if s.store == nil {
		st, err := checkpoint.NewKafkaStore(cfg.Dialer, cfg.Brokers, cfg.Topics.Changelog)
		if err != nil {
			return nil, err
		}
		s.store = st
	}
	var transport kafka.RoundTripper // a nil *Transport in the interface would be dereferenced
	if cfg.Transport != nil {
		transport = cfg.Transport
	}
	for kind, topic := range map[string]string{pipeline.OutPrediction: cfg.Topics.Predictions, pipeline.OutQuery: cfg.Topics.Queries, pipeline.OutDeadLetter: cfg.Topics.DeadLetters} {
		s.writers[kind] = &kafka.Writer{Addr: kafka.TCP(cfg.Brokers...), Topic: topic, Balancer: &kafka.Hash{},
			BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll, Transport: transport}
	}
	return s, nil
}

// ensureTopics creates missing topics and checks co-partitioning.
func (s *Service) ensureTopics(ctx context.Context) error {
	conn, err := s.cfg.Dialer.DialContext(ctx, "tcp", s.cfg.Brokers[0])
	if err != nil {
		return fmt.Errorf("connect to %s: %w", s.cfg.Brokers[0], err)
	}
	defer conn.Close()
	t := s.cfg.Topics
	for _, name := range []string{t.Events, t.Labels, t.Predictions, t.Queries, t.DeadLetters, t.Changelog} {
		if name == "" {
			continue
		}
		tc := kafka.TopicConfig{Topic: name, NumPartitions: s.cfg.Partitions, ReplicationFactor: s.cfg.Replication}
		if name == t.Changelog {
			tc.ConfigEntries = []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}
		}
		if err := conn.CreateTopics(tc); err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
	}
	count := func(topic string) (int, error) {
		ps, err := conn.ReadPartitions(topic)
		return len(ps), err
	}
	ne, err := count(t.Events)
	if err != nil {
		return fmt.Errorf("topic %s: %w", t.Events, err)
	}
	for _, other := range []string{t.Labels, t.Changelog} {
		if other == "" {
			continue
		}
		n, err := count(other)
		if err != nil {
			return fmt.Errorf("topic %s: %w", other, err)
		}
		if n != ne {
			return fmt.Errorf("topic %s has %d partitions but %s has %d: they must be co-partitioned (same partition count, same keys) so that a key's labels and state live with its events", other, n, t.Events, ne)
		}
	}
	return nil
}

// Totals returns the counters so far.
func (s *Service) Totals() Totals {
	return Totals{Events: s.events.Load(), Predictions: s.predictions.Load(), Queries: s.queries.Load(), Labeled: s.labeled.Load(),
		Mistakes: s.mistakes.Load(), LabelsJoined: s.joined.Load(), DeadLetters: s.dead.Load()}
}

// Ready reports whether every assigned partition has been restored.
func (s *Service) Ready() bool {
	ready := true
	s.assigned.Range(func(_, v any) bool {
		ready = ready && v.(bool)
		return ready
	})
	return ready
}

// Lag returns, per owned partition, how many records of the events topic
// are behind the last one processed: high watermark − next offset, computed
// from the fetched records' high watermarks (kafka-go's group reader reports 0).
func (s *Service) Lag() map[int]int64 {
	out := map[int]int64{}
	s.lag.Range(func(k, v any) bool {
		out[k.(int)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// Assigned is the number of partitions this instance currently owns.
func (s *Service) Assigned() int {
	n := 0
	s.assigned.Range(func(_, _ any) bool { n++; return true })
	return n
}

// Run consumes until ctx is cancelled; it checkpoints every partition before
// returning. It returns nil on cancellation.
func (s *Service) Run(ctx context.Context) error {
	topicsList := []string{s.cfg.Topics.Events}
	if s.cfg.Topics.Labels != "" {
		topicsList = append(topicsList, s.cfg.Topics.Labels)
	}
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{ID: s.cfg.Group, Brokers: s.cfg.Brokers, Dialer: s.cfg.Dialer,
		Topics: topicsList, StartOffset: kafka.FirstOffset, HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second,
		RebalanceTimeout: 10 * time.Second, JoinGroupBackoff: 200 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("consumer group %s: %w", s.cfg.Group, err)
	}
	defer group.Close()
	defer func() {
		for _, w := range s.writers {
			w.Close()
		}
	}()
	for {
		gen, err := group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("consumer group %s: %w", s.cfg.Group, err)
		}
		labelsAt := map[int]int64{}
		for _, a := range gen.Assignments[s.cfg.Topics.Labels] {
			labelsAt[a.ID] = a.Offset
		}
		var wg sync.WaitGroup
		for _, a := range gen.Assignments[s.cfg.Topics.Events] {
			a := a
			s.assigned.Store(a.ID, false)
			wg.Add(1)
			gen.Start(func(gctx context.Context) {
				defer wg.Done()
				defer s.assigned.Delete(a.ID)
				defer s.lag.Delete(a.ID)
				// Stop on revocation (gctx) or on shutdown (ctx), whichever comes first.
				pctx, pcancel := context.WithCancel(gctx)
				defer pcancel()
				defer context.AfterFunc(ctx, pcancel)()
				if err := s.runPartition(pctx, gen, a.ID, [2]int64{a.Offset, labelsAt[a.ID]}); err != nil {
					s.log.Error("partition stopped", "partition", a.ID, "error", err)
				}
			})
		}
		wg.Wait() // the generation ended: rebalance or shutdown
		if ctx.Err() != nil {
			return nil
		}
	}
}

// committedOrZero turns kafka-go's relative start offsets into absolute ones.
func committedOrZero(o int64) int64 {
	if o < 0 {
		return 0
	}
	return o
}

// fetched is a record read from one of the partition's input topics.
type fetched struct {
	rec pipeline.Record
	hwm int64
	err error
}

func (s *Service) runPartition(ctx context.Context, gen *kafka.Generation, p int, committed [2]int64) error {
	start := time.Now()
	w, err := pipeline.NewWorker(s.cfg.Pipeline, p)
	if err != nil {
		return err
	}
	from, problems, err := w.Restore(ctx, s.store)
	if err != nil {
		return err
	}
	for _, prob := range problems {
		s.log.Warn("checkpoint record unreadable; replaying further back", "partition", p, "problem", prob)
	}
	committed = [2]int64{committedOrZero(committed[0]), committedOrZero(committed[1])}
	w.SuppressBelow(committed)
	s.log.Info("partition restored", "partition", p, "keys", w.Keys(), "replay_from", from[0], "committed", committed[0], "restore_ms", time.Since(start).Milliseconds())
	gauges := s.cfg.Metrics.partition(p)
	defer s.cfg.Metrics.forget(p)
	gauges.keys.Set(float64(w.Keys()))
	if m := s.cfg.Metrics; m != nil {
		m.restoreSeconds.Observe(time.Since(start).Seconds())
	}
	s.assigned.Store(p, true)

	rctx, cancel := context.WithCancel(ctx)
	ch := make(chan fetched, 256)
	var readers sync.WaitGroup
	defer func() { cancel(); readers.Wait() }() // stop the readers, then wait for them
	read := func(topicIdx int, topic string, offset int64) {
		defer readers.Done()
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: s.cfg.Brokers, Dialer: s.cfg.Dialer, Topic: topic, Partition: p,
			MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 50 * time.Millisecond})
		defer r.Close()
		if err := r.SetOffset(offset); err != nil {
			ch <- fetched{err: err}
			return
		}
		for {
			m, err := r.FetchMessage(rctx)
			if err != nil {
				if rctx.Err() == nil {
					ch <- fetched{err: fmt.Errorf("read %s/%d: %w", topic, p, err)}
				}
				return
			}
			select {
			case ch <- fetched{rec: pipeline.Record{Topic: topicIdx, Partition: p, Offset: m.Offset, Key: m.Key, Value: m.Value}, hwm: m.HighWaterMark}:
			case <-rctx.Done():
				return
			}
		}
	}
	readers.Add(1)
	go read(pipeline.EventsTopic, s.cfg.Topics.Events, from[0])
	if s.cfg.Topics.Labels != "" {
		readers.Add(1)
		go read(pipeline.LabelsTopic, s.cfg.Topics.Labels, from[1])
	}

	lag := &atomic.Int64{}
	s.lag.Store(p, lag)
	since, last := 0, time.Now()
	var through [2]int64 = [2]int64{-1, -1}
	tick := time.NewTicker(s.cfg.CheckpointInterval)
	defer tick.Stop()
	for {
		select {
		case f := <-ch:
			if f.err != nil {
				return f.err
			}
			before := w.Totals()
			if err := w.Process(ctx, f.rec); err != nil {
				return err
			}
			after := w.Totals()
			s.count(before, after)
			through[f.rec.Topic] = f.rec.Offset
			if f.rec.Topic == pipeline.EventsTopic {
				lag.Store(max(0, f.hwm-f.rec.Offset-1))
				gauges.lag.Set(float64(lag.Load()))
			}
			if after.Labeled > before.Labeled { // at most one scored event per record
				gauges.accuracy(after.Mistakes > before.Mistakes)
			}
			if since++; since >= s.cfg.CheckpointEvery {
				if err := s.checkpointDetached(ctx, gen, w, p, through); err != nil {
					return err
				}
				since, last = 0, time.Now()
			}
		case <-tick.C:
			if since > 0 && time.Since(last) >= s.cfg.CheckpointInterval {
				if err := s.checkpointDetached(ctx, gen, w, p, through); err != nil {
					return err
				}
				since, last = 0, time.Now()
			}
		case <-ctx.Done():
			// Revoked or stopping: checkpoint synchronously before releasing.
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ccancel()
			if since == 0 || s.crashed.Load() {
				return nil
			}
			err := s.checkpoint(cctx, gen, w, p, through)
			if errors.Is(err, errCommit) {
				// The generation is over, so the commit is refused; the marker is
				// written, and the next owner resumes after it.
				s.log.Info("final commit refused after revocation; the checkpoint marker covers it", "partition", p, "error", err)
				return nil
			}
			return err
		}
	}
}

// checkpointDetached runs a checkpoint that a revocation or shutdown arriving
// meanwhile does not interrupt: a half-done checkpoint (outputs flushed, no
// marker) would repeat outputs after the restart.
func (s *Service) checkpointDetached(ctx context.Context, gen *kafka.Generation, w *pipeline.Worker, p int, through [2]int64) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return s.checkpoint(cctx, gen, w, p, through)
}

func (s *Service) count(before, after pipeline.Totals) {
	if m := s.cfg.Metrics; m != nil {
		m.events.Add(float64(after.Events - before.Events))
		m.predictions.Add(float64(after.Predictions - before.Predictions))
		m.mistakes.Add(float64(after.Mistakes - before.Mistakes))
		m.queries.Add(float64(after.Queries - before.Queries))
		m.labelsJoined.Add(float64(after.LabelsJoined - before.LabelsJoined))
		m.labelsUnknown.Add(float64(after.LabelsUnknown - before.LabelsUnknown))
		m.labelsExpired.Add(float64(after.LabelsExpired - before.LabelsExpired))
		if after.DeadLetters > before.DeadLetters {
			m.deadLetters.WithLabelValues(pipeline.ReasonMissingKey).Add(float64(after.MissingKey - before.MissingKey))
			m.deadLetters.WithLabelValues(pipeline.ReasonInvalidEvent).Add(float64(after.InvalidEvent - before.InvalidEvent))
			m.deadLetters.WithLabelValues(pipeline.ReasonRejected).Add(float64(after.Rejected - before.Rejected))
		}
	}
	s.events.Add(after.Events - before.Events)
	s.predictions.Add(after.Predictions - before.Predictions)
	s.queries.Add(after.Queries - before.Queries)
	s.labeled.Add(after.Labeled - before.Labeled)
	s.mistakes.Add(after.Mistakes - before.Mistakes)
	s.joined.Add(after.LabelsJoined - before.LabelsJoined)
	s.dead.Add(after.DeadLetters - before.DeadLetters)
}

// checkpoint runs the protocol: flush outputs, write the checkpoint, commit.
func (s *Service) checkpoint(ctx context.Context, gen *kafka.Generation, w *pipeline.Worker, p int, through [2]int64) error {
	start := time.Now()
	n := 0
	defer func() {
		if m := s.cfg.Metrics; m != nil {
			m.checkpointSeconds.Observe(time.Since(start).Seconds())
			m.checkpointBytes.Observe(float64(n))
			m.keys.WithLabelValues(part(p)).Set(float64(w.Keys()))
		}
	}()
	byKind := map[string][]kafka.Message{}
	for _, o := range w.TakeOutputs() {
		m := kafka.Message{Key: o.Key, Value: o.Value}
		for k, v := range o.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: k, Value: []byte(v)})
		}
		byKind[o.Kind] = append(byKind[o.Kind], m)
	}
	for kind, msgs := range byKind {
		if err := s.writers[kind].WriteMessages(ctx, msgs...); err != nil {
			return fmt.Errorf("partition %d: write %s: %w", p, kind, err)
		}
	}
	_, bytes, err := w.Checkpoint(ctx, s.store)
	if err != nil {
		return err
	}
	n = bytes
	offsets := map[string]map[int]int64{}
	if through[0] >= 0 {
		offsets[s.cfg.Topics.Events] = map[int]int64{p: through[0] + 1}
	}
	if through[1] >= 0 {
		offsets[s.cfg.Topics.Labels] = map[int]int64{p: through[1] + 1}
	}
	if err := gen.CommitOffsets(offsets); err != nil {
		return fmt.Errorf("partition %d: %w: %v", p, errCommit, err)
	}
	return nil
}
