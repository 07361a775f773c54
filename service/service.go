// Package service runs driftstream on Kafka (docs/spec/DESIGN.md §1, §4): a consumer
// group whose generations assign partitions, and for each assigned partition
// one pipeline.Runner fed by Kafka adapters — partition readers as its
// source, the output topics as its sink, the generation's offset commits as
// its committer — with the changelog topic (or another checkpoint.Store)
// keeping its keys.
//
// Failure policy: the Runner retries what is retriable in place; a
// partition whose Runner fails (a permanent error, or a retriable one past
// Config.Retry.Timeout) stops processing and stays stopped — it keeps its
// assignment, so no other member starts a restore-and-fail loop on it — the
// failure is counted (driftstream_partition_errors_total{kind},
// driftstream_partition_failed), Ready reports it, and Run returns an error
// Config.FailExitAfter later, after the other partitions have written their
// final checkpoints, so that the process exits non-zero and is restarted.
// Consumer-group errors are retried by kafka-go itself; Run only gives up
// when they persist for Config.Retry.Timeout.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/driftstream/driftstream/keystore"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
)

// Topics names the topics the service reads and writes.
type Topics struct {
	Events, Labels                    string // Labels is optional
	Predictions, Queries, DeadLetters string
	// Alerts receives drift alerts; required when the pipeline runs drift
	// detectors.
	Alerts    string
	Changelog string
}

// The defaults of Config's unset fields: the one table (package config's
// environment defaults are checked against it).
const (
	DefaultCheckpointEvery  = 10_000
	DefaultCheckpointPeriod = 5 * time.Second
	// CheckpointMaxFactor times CheckpointEvery is CheckpointMaxEvery's
	// default.
	CheckpointMaxFactor   = 10
	DefaultFailExitAfter  = 30 * time.Second
	DefaultFinalTimeout   = 30 * time.Second
	DefaultSessionTimeout = 10 * time.Second
	DefaultMergeWait      = time.Duration(0)
)

// Config configures a service.
type Config struct {
	Brokers []string
	// Dialer carries TLS and SASL settings; nil dials plainly.
	Dialer *kafka.Dialer
	// Transport is the writers' transport (TLS, SASL); nil is plain. The
	// readers of the input topics get one of their own with its settings.
	Transport *kafka.Transport
	// Isolation is what is read of the input topics' transactional records
	// (default kafkaread.ReadCommitted: aborted records are never read).
	Isolation kafkaread.Isolation
	// MergeWait is how long a partition's merge of the events and labels
	// topics waits for a caught-up input, for records still to reach the
	// broker, before it goes on without it (pipeline.Merge; counted in
	// driftstream_merge_went_on_total); negative: for ever; zero
	// (DefaultMergeWait): not at all. Records already on the broker are
	// always waited for.
	MergeWait time.Duration
	Group     string
	Topics    Topics
	// Partitions is the partition count of the topics the service creates
	// when the events topic does not exist (0: DefaultPartitions); an
	// existing events topic's count is used otherwise, and a Partitions
	// that differs from it is refused. Replication is the replication
	// factor of the topics it creates.
	Partitions, Replication int
	// StreamTopicConfig are topic settings (such as retention.ms) for the
	// input and output topics the service creates; the changelog is always
	// created compacted, without them.
	StreamTopicConfig map[string]string
	Pipeline          pipeline.Config
	// Store keeps checkpoints; nil means the Kafka changelog topic.
	Store checkpoint.Store
	// Sink receives the outputs; nil means the output topics.
	Sink pipeline.Sink
	// OnOutputError is what an output the broker refuses for itself (too
	// large, an invalid record) does: OnOutputErrorDeadLetter (the default)
	// replaces it with a dead letter and goes on, OnOutputErrorFail fails
	// the partition. Errors of the broker or the partition are retried.
	OnOutputError string
	// CheckpointEvery checkpoints a partition after this many records
	// (default DefaultCheckpointEvery), or after CheckpointPeriod,
	// whichever comes first.
	CheckpointEvery  int
	CheckpointPeriod time.Duration
	// CheckpointMaxEvery is how many records a checkpoint due by the count
	// may wait for while it would write more than one key record for every
	// pipeline.RecordsPerKeyRecord records (pipeline.RunnerConfig's; the
	// period bounds it all the same). Default (0): CheckpointMaxFactor
	// times CheckpointEvery; CheckpointEvery: no wait.
	CheckpointMaxEvery int
	// FlushInterval writes outputs this often between checkpoints (0: at
	// checkpoints only); see pipeline.RunnerConfig.FlushInterval.
	FlushInterval time.Duration
	// Retry is the retry policy of every partition step and of the consumer
	// group (zero: pipeline.DefaultBackoff).
	Retry pipeline.Backoff
	// FailExitAfter is how long Run keeps going after a partition failed
	// (so that /readyz and the metrics are seen) before it returns an error
	// (default 30 s).
	FailExitAfter time.Duration
	// FinalTimeout bounds a partition's last checkpoint on revocation or
	// shutdown (default 30 s).
	FinalTimeout time.Duration
	// TopicCheckInterval is how often the input topics' partition counts
	// are read while running (default DefaultTopicCheckInterval): a topic
	// that grew is reported, never silently unread (watchTopics).
	TopicCheckInterval time.Duration
	// SessionTimeout is the consumer-group session timeout (default 10 s):
	// a member silent for longer loses its partitions.
	SessionTimeout time.Duration
	// InstanceID, when set, is this member's identity across its restarts
	// (a pod's name; unique in the group): its group member joins with it
	// as client ID, and at start the service removes from the group the
	// memberships a former process with the same InstanceID left (killed
	// without leaving), so that their partitions move at once rather than
	// after SessionTimeout (membership.go). Empty: off.
	InstanceID string
	// StateDir, when set, keeps each partition's keys beyond CacheKeys on
	// local disk, in a Pebble key store under this directory (package
	// keystore), instead of all in memory. The stores are caches of the
	// changelog, rebuilt on a restore: an emptyDir volume will do. The
	// directory is this member's alone: New removes the stores a former
	// process left in it, except those it parked (ParkState).
	StateDir string
	// ParkState, with StateDir on a persistent volume, parks each
	// partition's key store there when the service shuts down or a
	// rebalance gives the partition to another member (pipeline.Kept.Park),
	// and resumes a partition assigned to this process later from its
	// parked store: without reading the changelog when nothing was written
	// to it in between, and reading only what was written since otherwise
	// (the records other members wrote meanwhile); it is restored as usual
	// only when that tail is gone (retention) or the store cannot be used.
	ParkState bool
	// CacheKeys is the number of keys per partition held in memory after
	// each checkpoint when StateDir is set.
	CacheKeys int
	// KeyStore sizes and tunes the key stores under StateDir (the zero
	// value: keystore's defaults); its Logger is replaced by the service's,
	// with the partition. Tests inject disk faults through its FS.
	KeyStore keystore.Options
	// Owner names this member in ownership records (default host/pid).
	Owner  string
	Logger *slog.Logger
	// Metrics, when set, receives the service's Prometheus metrics.
	Metrics *Metrics
}

// Totals are the service's counters, summed over partitions.
type Totals struct {
	Events, Predictions, Queries, Labeled, Mistakes, LabelsJoined, DeadLetters int64
	// PeerLearned counts the other partitions' labeled events the shared
	// parts learned (pipeline.Config.SharedAcrossPartitions).
	PeerLearned int64
	// ResumedFromMemory counts partitions that resumed the state this
	// process kept in memory across a rebalance instead of being restored
	// from the changelog.
	ResumedFromMemory int64
	// ResumedFromParked counts partitions that resumed the key store a
	// former process parked (ParkState) instead of being restored.
	ResumedFromParked int64
	// CaughtUp counts the resumed partitions (from memory or parked) whose
	// changelog had moved on, brought up to date from its tail.
	CaughtUp int64
}

// Service is a running driftstream consumer.
type Service struct {
	cfg   Config
	store checkpoint.Store
	sink  pipeline.Sink
	log   *slog.Logger

	count *counters
	parts sync.Map // partition → *partState

	// keptMu guards kept, and is held while a kept state is released —
	// parked on disk, which takes a moment — so that a partition assigned
	// again meanwhile (keptOrParked) finds either the state in kept or the
	// finished park, never a park half written.
	keptMu sync.Mutex
	kept   map[int]*pipeline.Kept // state of partitions revoked cleanly, for when they come back
	// keyStores counts the key stores opened (StateDir), naming their directories.
	keyStores atomic.Int64
	// stateDirMeasured is when StateDir's size was last read (Unix ns).
	stateDirMeasured atomic.Int64

	// fetchTransport carries the input topics' fetches (Config.Transport's
	// settings, its own connections).
	fetchTransport *kafka.Transport
	// unreadPartitions counts input partitions added while running, which
	// the service does not serve; grown says so (watchTopics).
	unreadPartitions atomic.Int64
	grown            atomic.Pointer[string]
	// eventPartitions is the events topic's partition count, as checked
	// at start.
	eventPartitions int
	// changelogLimit is the changelog topic's max.message.bytes.
	changelogLimit int
	// shuttingDown is set when Run's context ends: a partition stopped then
	// is shut down, not revoked.
	shuttingDown atomic.Bool
	// assigned is the number of events partitions the current consumer-group
	// generation gave this member; -1 outside a generation (joining, or a
	// rebalance in progress).
	assigned atomic.Int64

	mu       sync.Mutex
	failed   map[int]error // partitions that failed; sticky for the life of the process
	failedCh chan struct{} // closed at the first failure
}

// partState is what the service shows of one owned partition.
type partState struct {
	p      int
	runner atomic.Pointer[pipeline.Runner]
}

// snapshot is the partition's last published snapshot (the zero Snapshot
// before its Runner exists).
func (st *partState) snapshot() pipeline.Snapshot {
	if r := st.runner.Load(); r != nil {
		return r.Snapshot()
	}
	return pipeline.Snapshot{}
}

// New validates the configuration, creates missing topics (the changelog
// compacted) and checks them: co-partitioned, changelog compacted.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if len(cfg.Brokers) == 0 || cfg.Group == "" || cfg.Topics.Events == "" {
		return nil, errors.New("brokers, group and events topic are required")
	}
	if err := cfg.Pipeline.Validate(); err != nil {
		return nil, err
	}
	cfg.Pipeline = cfg.Pipeline.WithDefaults()
	switch cfg.OnOutputError {
	case "":
		cfg.OnOutputError = OnOutputErrorDeadLetter
	case OnOutputErrorDeadLetter, OnOutputErrorFail:
	default:
		return nil, fmt.Errorf("on output error %q: use %s or %s", cfg.OnOutputError, OnOutputErrorDeadLetter, OnOutputErrorFail)
	}
	if len(cfg.Pipeline.Detectors) > 0 && cfg.Topics.Alerts == "" && cfg.Sink == nil {
		return nil, errors.New("drift detectors are configured but no alerts topic: set one")
	}
	if cfg.Dialer == nil {
		cfg.Dialer = &kafka.Dialer{Timeout: 10 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = DefaultCheckpointEvery
	}
	if cfg.CheckpointPeriod <= 0 {
		cfg.CheckpointPeriod = DefaultCheckpointPeriod
	}
	if cfg.CheckpointMaxEvery <= 0 {
		cfg.CheckpointMaxEvery = CheckpointMaxFactor * cfg.CheckpointEvery
	}
	if cfg.CheckpointMaxEvery < cfg.CheckpointEvery { // refused here, not by each partition's runner later
		return nil, fmt.Errorf("checkpoint at most every %d records, fewer than every %d: set it to 0 (%d times the interval) or at least the interval",
			cfg.CheckpointMaxEvery, cfg.CheckpointEvery, CheckpointMaxFactor)
	}
	if cfg.Retry == (pipeline.Backoff{}) {
		cfg.Retry = pipeline.DefaultBackoff
	}
	if cfg.FailExitAfter <= 0 {
		cfg.FailExitAfter = DefaultFailExitAfter
	}
	if cfg.FinalTimeout <= 0 {
		cfg.FinalTimeout = DefaultFinalTimeout
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.TopicCheckInterval <= 0 {
		cfg.TopicCheckInterval = DefaultTopicCheckInterval
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		cfg.Owner = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	cfg.Replication = max(cfg.Replication, 1)
	s := &Service{cfg: cfg, log: cfg.Logger, count: newCounters(), failed: map[int]error{}, failedCh: make(chan struct{}), kept: map[int]*pipeline.Kept{}}
	s.assigned.Store(-1)
	s.fetchTransport = readerTransport(cfg.Transport)
	cfg.Metrics.attach(s)
	if err := s.prepareStateDir(); err != nil {
		return nil, err
	}
	if err := s.ensureTopics(ctx); err != nil {
		return nil, s.explain(ctx, err)
	}
	if err := s.sizeOutputs(ctx); err != nil {
		return nil, s.explain(ctx, err)
	}
	s.store = cfg.Store
	if s.store == nil {
		st, err := checkpoint.NewKafkaStore(cfg.Dialer, cfg.Brokers, cfg.Topics.Changelog)
		if err != nil {
			return nil, err
		}
		st.SetBatchLimit(s.changelogLimit)
		st.Verify = s.checkChangelog
		s.store = st
	}
	s.sink = cfg.Sink
	if s.sink == nil {
		s.sink = newKafkaSink(s.cfg, s.count.refusedOutput)
	}
	return s, nil
}

// Totals returns the counters so far, summed over every partition this
// process ran: the counts the metrics show.
func (s *Service) Totals() Totals {
	t, _ := s.count.read()
	return Totals{Events: t.Events, Predictions: t.Predictions, Queries: t.Queries, Labeled: t.Labeled, Mistakes: t.Mistakes,
		LabelsJoined: t.LabelsJoined, DeadLetters: t.DeadLetters + s.count.refusedTotal(), PeerLearned: t.PeerLearned,
		ResumedFromMemory: s.count.resumed.Load(), ResumedFromParked: s.count.unparked.Load(), CaughtUp: s.count.caughtUp.Load()}
}

// Ready reports whether the service is doing its job: it is in a
// consumer-group generation (not joining or rebalancing), no partition has
// failed, and every partition the generation assigned it runs, restored. A
// member in a generation that assigned it nothing (more members than
// partitions) is ready: a standby. When it is not ready, reason says why.
func (s *Service) Ready() (ok bool, reason string) {
	s.mu.Lock()
	if len(s.failed) > 0 {
		ps := slices.Sorted(maps.Keys(s.failed))
		err := s.failed[ps[0]]
		s.mu.Unlock()
		return false, fmt.Sprintf("%d partition(s) failed %v: %v; the process exits within %s", len(ps), ps, err, s.cfg.FailExitAfter)
	}
	s.mu.Unlock()
	if g := s.grown.Load(); g != nil {
		return false, *g
	}
	assigned := s.assigned.Load()
	if assigned < 0 {
		return false, fmt.Sprintf("joining consumer group %s (a rebalance is in progress, or the group has not answered yet)", s.cfg.Group)
	}
	var restoring []int
	running := int64(0)
	s.parts.Range(func(k, v any) bool {
		running++
		if v.(*partState).snapshot().Phase < pipeline.PhaseRunning {
			restoring = append(restoring, k.(int))
		}
		return true
	})
	if len(restoring) > 0 {
		slices.Sort(restoring)
		return false, fmt.Sprintf("restoring partitions %v", restoring)
	}
	if running < assigned {
		return false, fmt.Sprintf("starting %d of %d assigned partitions", assigned-running, assigned)
	}
	return true, ""
}

// Lag returns, per owned partition, how many records of the events topic
// are behind the last one processed: high watermark − next offset, computed
// from the fetched records' high watermarks (kafka-go's group reader reports 0).
func (s *Service) Lag() map[int]int64 {
	return s.perPartition(func(snap pipeline.Snapshot) int64 { return snap.Lag })
}

// LabelsLag is Lag for the labels topic (0 without one).
func (s *Service) LabelsLag() map[int]int64 {
	return s.perPartition(func(snap pipeline.Snapshot) int64 { return snap.LabelsLag })
}

// perPartition reads one value of each running partition's snapshot.
func (s *Service) perPartition(read func(pipeline.Snapshot) int64) map[int]int64 {
	out := map[int]int64{}
	s.parts.Range(func(k, v any) bool {
		out[k.(int)] = read(v.(*partState).snapshot())
		return true
	})
	return out
}

// Assigned is the number of partitions this instance currently runs.
func (s *Service) Assigned() int {
	n := 0
	s.parts.Range(func(_, _ any) bool { n++; return true })
	return n
}

// errPartitionFailed is the cause Run cancels its partitions with when a
// failed partition's grace period is over.
var errPartitionFailed = errors.New("partition failed")

// Run consumes until ctx is cancelled, checkpointing every partition before
// it returns nil. It returns an error FailExitAfter after a partition failed
// (or at once when ctx ends during that grace period), or when the consumer
// group keeps failing for Retry.Timeout.
func (s *Service) Run(ctx context.Context) error {
	topicsList := []string{s.cfg.Topics.Events}
	if s.cfg.Topics.Labels != "" {
		topicsList = append(topicsList, s.cfg.Topics.Labels)
	}
	if s.cfg.InstanceID != "" {
		switch n, err := s.evictFormerSelf(ctx); {
		case err != nil:
			s.log.Warn("a former process's group membership could not be removed: its partitions move when its session times out",
				"instance_id", s.cfg.InstanceID, "session_timeout", s.cfg.SessionTimeout.String(), "error", err)
		case n > 0:
			s.log.Info("removed the group membership of a former process: its partitions move now, not after its session timeout",
				"instance_id", s.cfg.InstanceID, "memberships", n)
		}
	}
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{ID: s.cfg.Group, Brokers: s.cfg.Brokers, Dialer: s.groupDialer(),
		Topics: topicsList, StartOffset: kafka.FirstOffset, HeartbeatInterval: min(time.Second, s.cfg.SessionTimeout/3),
		SessionTimeout: s.cfg.SessionTimeout, RebalanceTimeout: 10 * time.Second, JoinGroupBackoff: 200 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("consumer group %s: %w", s.cfg.Group, err)
	}
	defer group.Close()
	if c, ok := s.sink.(interface{ Close() error }); ok && s.cfg.Sink == nil {
		defer c.Close()
	}
	if s.cfg.Store == nil { // the changelog store is ours: release its connections
		defer s.store.Close()
	}
	defer s.releaseKept() // and the states kept for partitions that did not come back: parked, or their key stores closed
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	defer context.AfterFunc(runCtx, func() { s.shuttingDown.Store(true) })()
	go s.watchTopics(runCtx)
	go func() { // a failed partition ends the run after the grace period
		select {
		case <-s.failedCh:
		case <-runCtx.Done():
			return
		}
		t := time.NewTimer(s.cfg.FailExitAfter)
		defer t.Stop()
		select {
		case <-t.C:
			stop(errPartitionFailed)
		case <-runCtx.Done():
		}
	}()
	var failingSince time.Time
	joined := false // a first generation was had
	for {
		gen, err := group.Next(runCtx)
		if err != nil {
			if runCtx.Err() != nil {
				break
			}
			if errors.Is(err, kafka.ErrGroupClosed) {
				return fmt.Errorf("consumer group %s: %w", s.cfg.Group, err)
			}
			// kafka-go rejoins by itself; keep waiting unless it never succeeds.
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if m := s.cfg.Metrics; m != nil {
				m.groupErrors.Inc()
			}
			if time.Since(failingSince) > s.cfg.Retry.Timeout {
				return fmt.Errorf("consumer group %s: still failing after %s: %w", s.cfg.Group, s.cfg.Retry.Timeout, err)
			}
			if !joined && forming(err) {
				// A fresh cluster creates __consumer_offsets and elects the
				// group's coordinator at the first join: these answers are
				// the wait, not a fault (docs/OPERATIONS.md).
				s.log.Debug("consumer group forming: the coordinator is not ready yet; kafka-go rejoins", "group", s.cfg.Group, "error", err)
				continue
			}
			s.log.Warn("consumer group error; kafka-go rejoins", "group", s.cfg.Group, "error", err)
			continue
		}
		failingSince, joined = time.Time{}, true
		s.runGeneration(runCtx, gen)
	}
	if s.isFailedAny() { // after the grace period, or stopped during it
		return s.failure()
	}
	return nil
}

// forming reports whether err is a group coordinator's answer while the
// group (or the cluster's offsets topic) is still being set up.
func forming(err error) bool {
	return errors.Is(err, kafka.GroupCoordinatorNotAvailable) || errors.Is(err, kafka.GroupLoadInProgress) ||
		errors.Is(err, kafka.NotCoordinatorForGroup) || errors.Is(err, kafka.RebalanceInProgress)
}

// failure is the error Run returns after a partition failed.
func (s *Service) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, p := range slices.Sorted(maps.Keys(s.failed)) {
		errs = append(errs, s.failed[p])
	}
	return fmt.Errorf("stopped because %w", errors.Join(errs...))
}

// runGeneration runs a Runner per assigned partition until the generation
// ends (rebalance) or ctx does. kafka-go ends a generation as soon as any
// function it started returns, so a partition that failed parks until then
// instead of returning.
func (s *Service) runGeneration(ctx context.Context, gen *kafka.Generation) {
	labelsAt := map[int]int64{}
	for _, a := range gen.Assignments[s.cfg.Topics.Labels] {
		labelsAt[a.ID] = a.Offset
	}
	s.dropKept(gen.Assignments[s.cfg.Topics.Events])
	s.assigned.Store(int64(len(gen.Assignments[s.cfg.Topics.Events])))
	defer s.assigned.Store(-1) // the generation is over: rebalancing
	var wg sync.WaitGroup
	for _, a := range gen.Assignments[s.cfg.Topics.Events] {
		wg.Add(1)
		gen.Start(func(gctx context.Context) {
			defer wg.Done()
			// Stop on revocation (gctx) or on shutdown (ctx), whichever comes first.
			pctx, cancel := context.WithCancel(gctx)
			defer cancel()
			defer context.AfterFunc(ctx, cancel)()
			if s.isFailed(a.ID) {
				<-pctx.Done()
				return
			}
			err := s.runPartition(pctx, gctx, gen, a.ID, [2]int64{a.Offset, labelsAt[a.ID]})
			if err != nil {
				s.fail(a.ID, err)
				<-pctx.Done()
			}
		})
	}
	wg.Wait()
}

func (s *Service) runPartition(ctx, gctx context.Context, gen *kafka.Generation, p int, committed [2]int64) error {
	st := &partState{p: p}
	s.parts.Store(p, st)
	defer s.parts.Delete(p)
	keys, err := s.openKeyStore(p)
	if err != nil {
		return &pipeline.PartitionError{Partition: p, Step: pipeline.StepRestore, Err: err}
	}
	r, err := pipeline.NewRunner(pipeline.RunnerConfig{Partition: p, Pipeline: s.cfg.Pipeline, Store: s.store, KeyStore: keys, CacheKeys: s.cfg.CacheKeys,
		Open: func(ctx context.Context, from pipeline.From) (pipeline.Source, error) {
			return s.openSource(ctx, p, from)
		},
		Sink: s.sink, Committer: &groupCommitter{gen: gen, gctx: gctx, topics: [2]string{s.cfg.Topics.Events, s.cfg.Topics.Labels}, partition: p},
		Generation: gen.ID, Owner: s.cfg.Owner, Committed: committed, CheckpointEvery: s.cfg.CheckpointEvery,
		CheckpointMaxEvery: s.cfg.CheckpointMaxEvery, CheckpointPeriod: s.cfg.CheckpointPeriod, FlushInterval: s.cfg.FlushInterval, FinalTimeout: s.cfg.FinalTimeout, Retry: s.cfg.Retry, Hooks: []pipeline.Hook{s.observer()}, Logger: s.log,
		Kept: s.keptOrParked(p)})
	if err != nil {
		if keys != nil {
			keys.Close()
		}
		return &pipeline.PartitionError{Partition: p, Step: pipeline.StepRestore, Err: err}
	}
	st.runner.Store(r)
	s.count.start(p, r)
	defer s.count.stop(p, r)
	if err := r.Run(ctx); err != nil {
		if gctx.Err() != nil && !s.shuttingDown.Load() && pipeline.IsFinal(err) {
			// Revoked (the generation ended: the broker was unreachable past
			// the session timeout, or a rebalance) while the broker could not
			// take the last checkpoint: nothing is lost, the partition's next
			// owner — perhaps this member, once the group is rejoined —
			// replays from the last checkpoint written. Not a failure.
			s.log.Warn("partition revoked before its last checkpoint could be written; its next owner replays from the last one written",
				"partition", p, "error", err)
			return nil
		}
		return err
	}
	switch k := r.Kept(); {
	case k == nil:
	case gctx.Err() != nil: // revoked (or shut down, which ends the generation too): it may come back
		s.keptMu.Lock()
		s.kept[p] = k
		s.keptMu.Unlock()
	default: // shut down
		s.release(p, k)
	}
	return nil
}

// takeKept hands over the state kept for partition p, if any.
func (s *Service) takeKept(p int) *pipeline.Kept {
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	k := s.kept[p]
	delete(s.kept, p)
	return k
}

// dropKept frees the kept state of partitions that a new generation did not
// give back to this member: parked with ParkState (release), so that the
// partition, if it comes back — in a rolling update it often does —
// catches up from its changelog's tail instead of being restored; closed
// otherwise.
func (s *Service) dropKept(assigned []kafka.PartitionAssignment) {
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	keep := map[int]bool{}
	for _, a := range assigned {
		keep[a.ID] = true
	}
	for p, k := range s.kept {
		if !keep[p] {
			s.release(p, k)
			delete(s.kept, p)
		}
	}
}

// releaseKept releases every kept state when the service stops (Run's
// end, once every partition has stopped): parked with ParkState, so that
// the next process may resume them, closed otherwise. A state kept for a
// partition revoked before the stop, and now another member's, is parked
// too; the next process that gets it catches it up from the changelog's
// tail.
func (s *Service) releaseKept() {
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	for p, k := range s.kept {
		s.release(p, k)
		delete(s.kept, p)
	}
}

// release parks (ParkState) or closes the kept state of partition p, which
// this process will not resume itself: at shutdown, or when a rebalance
// gave the partition to another member.
func (s *Service) release(p int, k *pipeline.Kept) {
	if s.cfg.ParkState {
		s.park(p, k)
		return
	}
	s.closeKept(p, k)
}

// closeKept releases the key store of a kept state that will not resume.
func (s *Service) closeKept(p int, k *pipeline.Kept) {
	if err := k.Close(); err != nil {
		s.log.Warn("closing a kept partition's key store", "partition", p, "err", err)
	}
}

func (s *Service) isFailedAny() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.failed) > 0
}

func (s *Service) isFailed(p int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.failed[p]
	return ok
}

// fail records a partition's failure: once in the log, in the metrics and in
// readiness; the first one starts the countdown to Run's error.
func (s *Service) fail(p int, err error) {
	step := string(pipeline.StepProcess)
	var pe *pipeline.PartitionError
	if errors.As(err, &pe) {
		step = string(pe.Step)
	}
	s.log.Error("partition failed; it stays stopped and the process exits", "partition", p, "step", step, "error", err,
		"exit_in", s.cfg.FailExitAfter.String())
	if m := s.cfg.Metrics; m != nil { // before readiness says so: whoever sees one sees both
		m.partitionErrors.WithLabelValues(step).Inc()
		m.partitionFailed.WithLabelValues(part(p)).Set(1)
	}
	s.mu.Lock()
	first := len(s.failed) == 0
	s.failed[p] = err
	s.mu.Unlock()
	if first {
		close(s.failedCh)
	}
}
