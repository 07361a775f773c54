package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// crash stands in for kill -9: once crashed, every checkpoint write and
// output write fails with ErrLost, so the partitions stop at once without
// writing anything more — outputs not yet flushed are lost, as they would
// be with the process.
type crash struct{ crashed atomic.Bool }

type crashStore struct {
	checkpoint.Store
	c *crash
}

type crashSink struct {
	pipeline.Sink
	c *crash
}

// crashing returns a crash switch with the store and sink it guards.
func crashing(t *testing.T, cfg Config) (*crash, checkpoint.Store, pipeline.Sink) {
	t.Helper()
	st, err := checkpoint.NewKafkaStore(&kafka.Dialer{}, cfg.Brokers, cfg.Topics.Changelog)
	if err != nil {
		t.Fatal(err)
	}
	c := &crash{}
	return c, crashStore{st, c}, crashSink{newKafkaSink(cfg, func(string, string) {}), c}
}

var errCrashed = fmt.Errorf("crashed: %w", pipeline.ErrLost)

func (s crashStore) Claim(ctx context.Context, o checkpoint.Ownership) error {
	if s.c.crashed.Load() {
		return errCrashed
	}
	return s.Store.Claim(ctx, o)
}

func (s crashStore) Write(ctx context.Context, keys []checkpoint.KeyRecord, m checkpoint.Marker) error {
	if s.c.crashed.Load() {
		return errCrashed
	}
	return s.Store.Write(ctx, keys, m)
}

func (s crashSink) Write(ctx context.Context, outs []pipeline.Output) error {
	if s.c.crashed.Load() {
		return errCrashed
	}
	return s.Sink.Write(ctx, outs)
}

// sinkFunc adapts a function to pipeline.Sink.
type sinkFunc func(context.Context, []pipeline.Output) error

func (f sinkFunc) Write(ctx context.Context, outs []pipeline.Output) error { return f(ctx, outs) }

// brokenStore refuses every checkpoint write after the first few, as a
// changelog the service may not write (ACLs, a deleted topic) would.
type brokenStore struct {
	checkpoint.Store
	okWrites atomic.Int64
}

var errNotAuthorized = errors.New("TOPIC_AUTHORIZATION_FAILED: not authorized to write the changelog")

func (b *brokenStore) Write(ctx context.Context, keys []checkpoint.KeyRecord, m checkpoint.Marker) error {
	if b.okWrites.Add(-1) < 0 {
		return errNotAuthorized
	}
	return b.Store.Write(ctx, keys, m)
}

// A partition whose checkpoints cannot be written fails, and only that
// partition: the others keep processing; /readyz turns not ready with the
// reason, the metrics move, Run returns an error FailExitAfter later, and
// the failed partition wrote at most two checkpoint intervals of outputs
// that a restart repeats.
func TestPermanentFailureEndsThePartitionNotTheService(t *testing.T) {
	kafkatest.Slow(t)
	addr := cluster(t)
	cfg := testConfig(t, addr, "g-broken")
	cfg.CheckpointEvery, cfg.CheckpointPeriod = 50, time.Hour
	cfg.FailExitAfter = 2 * time.Second
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = m
	base, _ := checkpoint.NewKafkaStore(&kafka.Dialer{}, []string{addr}, "changelog")
	broken := &brokenStore{Store: base}
	broken.okWrites.Store(2) // two checkpoints succeed, then every write is refused
	cfg.Store = broken
	var outputs atomic.Int64
	sink := newKafkaSink(cfg, func(string, string) {})
	cfg.Sink = sinkFunc(func(ctx context.Context, outs []pipeline.Output) error {
		outputs.Add(int64(len(outs)))
		return sink.Write(ctx, outs)
	})
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	produce(t, addr, 11, 900)
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- s.Run(context.Background()) }()
	eventually(t, 60*time.Second, func() bool { ok, _ := s.Ready(); return !ok && s.isFailedAny() }, func() string { return "no partition failed" })
	failedAt := time.Since(start)
	ok, reason := s.Ready()
	if ok || !strings.Contains(reason, "not authorized") || !strings.Contains(reason, "failed at store") {
		t.Fatalf("ready %v, reason %q", ok, reason)
	}
	if got := testutil.ToFloat64(m.partitionErrors.WithLabelValues("store")); got < 1 {
		t.Fatalf("partition_errors_total{kind=store} = %v", got)
	}
	var err2 error
	select {
	case err2 = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after a partition failed")
	}
	took := time.Since(start) - failedAt
	if err2 == nil || !strings.Contains(err2.Error(), "not authorized") {
		t.Fatalf("Run returned %v", err2)
	}
	if took < cfg.FailExitAfter-200*time.Millisecond || took > cfg.FailExitAfter+15*time.Second { // failedAt is polled: a few ms late
		t.Fatalf("Run returned %s after the failure, want %s plus the final checkpoints", took, cfg.FailExitAfter)
	}
	failed := 0
	for p := 0; p < partitions; p++ {
		failed += int(testutil.ToFloat64(m.partitionFailed.WithLabelValues(part(p))))
	}
	if failed == 0 || failed > partitions {
		t.Fatalf("%d partitions flagged failed", failed)
	}
	t.Logf("failed after %s, Run returned %s later: %v", failedAt.Round(time.Millisecond), took.Round(time.Millisecond), err2)
	// No output storm: each failing partition wrote at most two intervals
	// past its last marker.
	if n := outputs.Load(); n > int64(900+900/3+9+partitions*2*cfg.CheckpointEvery) {
		t.Fatalf("%d outputs written for 900 events", n)
	}
}

// An existing changelog that deletes records is refused with the fix.
func TestChangelogMustBeCompacted(t *testing.T) {
	addr := cluster(t)
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	err = conn.CreateTopics(kafka.TopicConfig{Topic: "changelog", NumPartitions: partitions, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "delete"}}})
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), testConfig(t, addr, "g-policy"))
	if err == nil || !strings.Contains(err.Error(), "cleanup.policy=delete") || !strings.Contains(err.Error(), "--add-config cleanup.policy=compact") {
		t.Fatalf("err = %v", err)
	}
}

// SIGTERM under backlog: the stop lands while records wait; every partition
// writes its final checkpoint, nothing is logged at ERROR, and a restart
// repeats no output.
func TestStopUnderBacklogRepeatsNothing(t *testing.T) {
	addr := cluster(t)
	cfg := testConfig(t, addr, "g-backlog")
	cfg.CheckpointEvery, cfg.CheckpointPeriod = 1<<30, time.Hour // only the final checkpoint
	var logs strings.Builder
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// A partition's backlog comes in one fetch and is processed in a tight
	// loop, and on two loaded CPUs this goroutine may see the 100 events
	// only tens of milliseconds later: a round was seen to read 14,800 of
	// 16,120 records, leaving the third round nothing to stop after. So the
	// backlog is large, each later round gets events of its own, and the
	// test asks that at least one stop lands while records wait.
	ids := produce(t, addr, 12, 24000)
	processed, underBacklog := int64(0), 0
	for i := 0; i < 3; i++ {
		if i > 0 {
			ids = append(ids, produce(t, addr, uint64(20+i), 1000)...)
		}
		s, stop := started(t, cfg)
		eventually(t, 60*time.Second, func() bool { return s.Totals().Events >= 100 }, func() string { return fmt.Sprintf("%+v", s.Totals()) })
		stop()
		if processed += s.Totals().Events; processed < int64(len(ids)) {
			underBacklog++
		}
	}
	if underBacklog == 0 {
		t.Fatalf("every round processed its whole backlog before the stop (%d events)", processed)
	}
	t.Logf("%d of 3 stops landed while records waited; %d of %d events processed before the last run", underBacklog, processed, len(ids))
	last := cfg
	last.CheckpointEvery, last.CheckpointPeriod = 100, 200*time.Millisecond
	_, stop := started(t, last)
	eventually(t, 60*time.Second, func() bool { return len(predictionsByID(t, addr)) >= len(ids) }, func() string { return "not all predicted" })
	stop()
	preds := predictionsByID(t, addr)
	dups := 0
	for _, id := range ids {
		n := preds[id]
		if n == 0 {
			t.Fatalf("event %s never predicted", id)
		}
		dups += n - 1
	}
	if dups != 0 {
		t.Fatalf("%d duplicate predictions after 3 stops under backlog", dups)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("a clean stop logged an error:\n%s", logs.String())
	}
}

// predictionsByID counts the predictions on the broker at addr per event id.
func predictionsByID(t *testing.T, addr string) map[string]int {
	t.Helper()
	preds := map[string]int{}
	for _, m := range readAll(t, addr, "predictions") {
		var p struct{ ID string }
		json.Unmarshal(m.Value, &p)
		preds[p.ID]++
	}
	return preds
}

// deliveries counts the wanted items that were delivered 0 times
// (missing), and the deliveries beyond the first (repeated).
func deliveries(want []string, delivered map[string]int) (missing, repeated int) {
	for _, w := range want {
		switch n := delivered[w]; {
		case n == 0:
			missing++
		case n > 1:
			repeated += n - 1
		}
	}
	return missing, repeated
}

// Consumer-group errors are kafka-go's to retry: the first join attempts
// fail, the service logs and counts them, keeps going, and processes
// everything once a join succeeds.
func TestTransientGroupErrorsAreRetried(t *testing.T) {
	c, cfg := controlledCluster(t, "g-flaky", nil)
	ids := produce(t, cfg.Brokers[0], 13, 300)
	var refused atomic.Int64
	c.ControlKey(kmsg.JoinGroup.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Add(1) > 3 {
			return nil, nil, false // from the fourth attempt on, the broker answers
		}
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil, true
	})
	s, stop := started(t, cfg)
	eventually(t, 60*time.Second, func() bool { return s.Totals().Events >= int64(len(ids)) }, func() string { return fmt.Sprintf("%+v", s.Totals()) })
	stop()
	if got := testutil.ToFloat64(cfg.Metrics.groupErrors); got < 3 {
		t.Fatalf("group_errors_total = %v after 3 refused joins", got)
	}
}

// The broker answers six requests with a retriable error (not the
// partition's leader), and the service retries each in place: fetches of
// the events topic (the source reconnects after the last processed record)
// and writes of predictions (the flush is written again). Every event is
// predicted exactly once, none missing, none repeated, with one retry per
// refusal. The produce case runs one partition, so that a refused write is
// the whole flush's predictions and the counts are exact.
func TestKafkaErrorsAreRetried(t *testing.T) {
	for _, tc := range []struct {
		name       string
		partitions int
		key        kmsg.Key
		step       pipeline.Step
		// refusal answers a request of the case's topic, and only those.
		refusal func(kmsg.Request) (kmsg.Response, bool)
	}{
		{"fetch", partitions, kmsg.Fetch, pipeline.StepSource, func(req kmsg.Request) (kmsg.Response, bool) {
			fr := req.(*kmsg.FetchRequest)
			if len(fr.Topics) != 1 || fr.Topics[0].Topic != "events" {
				return nil, false
			}
			return kafkatest.FetchRefused(fr, kerr.NotLeaderForPartition.Code), true
		}},
		{"produce", 1, kmsg.Produce, pipeline.StepSink, func(req kmsg.Request) (kmsg.Response, bool) {
			pr := req.(*kmsg.ProduceRequest)
			if len(pr.Topics) != 1 || pr.Topics[0].Topic != "predictions" {
				return nil, false
			}
			return kafkatest.ProduceRefused(pr, kerr.NotLeaderForPartition.Code), true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cfg := controlledCluster(t, "g-"+tc.name, func(cfg *Config) {
				cfg.Partitions = tc.partitions
				cfg.Retry = pipeline.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond, Timeout: 30 * time.Second}
			})
			addr := cfg.Brokers[0]
			ids := produce(t, addr, 17, 600)
			var refused atomic.Int64
			c.ControlKey(tc.key.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if refused.Load() >= 6 {
					return nil, nil, false
				}
				resp, ok := tc.refusal(req)
				if !ok || refused.Add(1) > 6 {
					return nil, nil, false
				}
				return resp, nil, true
			})
			s, stop := started(t, cfg)
			eventually(t, 60*time.Second, func() bool { return s.Totals().Events >= int64(len(ids)) },
				func() string { return fmt.Sprintf("%+v, %d refused", s.Totals(), refused.Load()) })
			stop() // flushes what is left
			if got := testutil.ToFloat64(cfg.Metrics.retries.WithLabelValues(string(tc.step))); refused.Load() != 6 || got != 6 {
				t.Fatalf("%d requests refused, retries_total{step=%s} = %v; want 6 and 6", refused.Load(), tc.step, got)
			}
			preds := predictionsByID(t, addr)
			missing, repeated := deliveries(ids, preds)
			if missing != 0 || repeated != 0 || len(preds) != len(ids) {
				t.Fatalf("%d events: %d missing, %d repeated predictions, %d ids predicted", len(ids), missing, repeated, len(preds))
			}
		})
	}
}

// controlledCluster is a broker whose requests a test can intercept
// (kfake's ControlKey), and a configuration of group on it with metrics,
// adjusted by tune (may be nil), whose topics are created.
func controlledCluster(t *testing.T, group string, tune func(*Config)) (*kfake.Cluster, Config) {
	t.Helper()
	c := kafkatest.Cluster(t, kfake.SeedTopics(-1))
	cfg := testConfig(t, c.ListenAddrs()[0], group)
	if tune != nil {
		tune(&cfg)
	}
	var err error
	if cfg.Metrics, err = NewMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

// A changelog deleted under a running service is never recreated by its
// writes, even on a broker that creates missing topics on a metadata
// request (as Apache Kafka does by default): the next connection of the
// changelog store checks the topic first, and the partition fails with
// ErrChangelogGone instead of writing checkpoints to a new, empty topic.
func TestDeletedChangelogIsNeverRecreated(t *testing.T) {
	c := kafkatest.Cluster(t, kfake.SeedTopics(-1), kfake.AllowAutoTopicCreation())
	addr := c.ListenAddrs()[0]
	cfg := testConfig(t, addr, "g-deleted-changelog")
	cfg.CheckpointEvery, cfg.CheckpointPeriod = 50, 100*time.Millisecond
	cfg.FailExitAfter = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	produce(t, addr, 21, 300)
	eventually(t, 60*time.Second, func() bool { return s.Totals().Events >= 300 }, func() string { return fmt.Sprintf("%+v", s.Totals()) })
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.DeleteTopics("changelog"); err != nil {
		t.Fatal(err)
	}
	produce(t, addr, 22, 300)
	eventually(t, 60*time.Second, s.isFailedAny, func() string { _, r := s.Ready(); return fmt.Sprintf("no partition failed: %+v %s", s.Totals(), r) })
	_, reason := s.Ready()
	if !strings.Contains(reason, "changelog topic changelog does not exist") {
		t.Fatalf("failed with %q, want the deleted changelog named", reason)
	}
	if kafkatest.TopicExists(t, addr, "changelog") {
		t.Fatal("the changelog came back")
	}
}

// An outage that outlasts a generation (here: the outputs' broker refusing
// connections while a rebalance revokes partitions) is ridden through: a
// revoked partition whose last checkpoint cannot be written within
// FinalTimeout is not a failure (its next owner replays from the last
// checkpoint), no partition fails, and once the outage ends every event is
// predicted.
func TestRevokedDuringAnOutageIsNoFailure(t *testing.T) {
	kafkatest.Slow(t)
	addr := cluster(t)
	var outage atomic.Bool
	var refused atomic.Int64
	cfg := testConfig(t, addr, "g-outage")
	cfg.FinalTimeout, cfg.FailExitAfter = 300*time.Millisecond, time.Hour
	sink := newKafkaSink(cfg, func(string, string) {})
	cfg.Sink = sinkFunc(func(ctx context.Context, outs []pipeline.Output) error {
		if outage.Load() {
			refused.Add(1)
			return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
		return sink.Write(ctx, outs)
	})
	a, stopA := started(t, cfg)
	ids := produce(t, addr, 31, 600)
	eventually(t, 60*time.Second, func() bool { return a.Totals().Events >= 600 }, func() string { return fmt.Sprintf("%+v", a.Totals()) })
	outage.Store(true)
	more := produce(t, addr, 32, 600)
	eventually(t, 60*time.Second, func() bool { return a.Totals().Events >= 900 }, func() string { return fmt.Sprintf("%+v", a.Totals()) })
	b, stopB := started(t, cfg) // a rebalance: a's partitions are revoked while nothing can be written
	eventually(t, 60*time.Second, func() bool { return b.Assigned() > 0 && refused.Load() > 10 }, func() string { return "no rebalance under the outage" })
	time.Sleep(2 * cfg.FinalTimeout) // the revoked partitions' final checkpoints time out
	outage.Store(false)
	eventually(t, 60*time.Second, func() bool {
		seen := map[string]bool{}
		for _, m := range readAll(t, addr, "predictions") {
			var id struct{ ID string }
			json.Unmarshal(m.Value, &id)
			seen[id.ID] = true
		}
		n := 0
		for _, id := range append(ids, more...) {
			if seen[id] {
				n++
			}
		}
		return n == len(ids)+len(more)
	}, func() string { return "not every event predicted" })
	if a.isFailedAny() || b.isFailedAny() {
		_, ra := a.Ready()
		_, rb := b.Ready()
		t.Fatalf("a partition failed: %q %q", ra, rb)
	}
	stopB()
	stopA()
}
