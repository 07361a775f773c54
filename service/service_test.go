package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/internal/poll"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

const partitions = 3

func cluster(t *testing.T) string {
	t.Helper()
	c := kafkatest.Cluster(t, kfake.SeedTopics(-1))
	return c.ListenAddrs()[0]
}

func testConfig(t *testing.T, addr, group string) Config {
	t.Helper()
	vec, _ := topics.NewVectorizer(3, 0)
	return Config{Brokers: []string{addr}, Group: group, Partitions: partitions, Replication: 1,
		Topics:          Topics{Events: "events", Predictions: "predictions", Queries: "label-queries", DeadLetters: "dead-letters", Changelog: "changelog"},
		Pipeline:        pipeline.Config{Settings: keyed.Settings{Learner: "lasec-ss", Params: json.RawMessage(`{"a":0.3}`), Seed: 3, Vector: vec, MaxPending: 100, PendingTTL: 10000}},
		CheckpointEvery: 100, CheckpointPeriod: 200 * time.Millisecond}
}

// produce writes n events over 20 keys (a third unlabeled, answered by a
// label record), plus a few bad records; it returns the event ids.
func produce(t *testing.T, addr string, seed uint64, n int) []string {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	r := rand.New(rand.NewPCG(seed, 1))
	var msgs []kafka.Message
	var ids []string
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("device-%d", r.IntN(20))
		x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		y := 1
		if x[0]+0.5*x[1] < 0 {
			y = -1
		}
		id := fmt.Sprintf("s%d-e%d", seed, i)
		ids = append(ids, id)
		xs, _ := json.Marshal(x)
		if i%3 == 0 {
			msgs = append(msgs, kafka.Message{Key: []byte(key), Value: []byte(fmt.Sprintf(`{"id":%q,"x":%s}`, id, xs))},
				kafka.Message{Key: []byte(key), Value: []byte(fmt.Sprintf(`{"id":%q,"label":%d}`, id, y))})
		} else {
			msgs = append(msgs, kafka.Message{Key: []byte(key), Value: []byte(fmt.Sprintf(`{"id":%q,"x":%s,"label":%d}`, id, xs, y))})
		}
		if i%100 == 50 {
			msgs = append(msgs, kafka.Message{Key: []byte(key), Value: []byte(`{"id":"bad","x":[1,2`)})
		}
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	return ids
}

// runUntil runs a service until it has processed want events, then stops it.
func runUntil(t *testing.T, cfg Config, want int64) Totals {
	t.Helper()
	s, stop := started(t, cfg)
	eventually(t, 60*time.Second, func() bool { return s.Totals().Events >= want }, func() string { return fmt.Sprintf("%+v", s.Totals()) })
	stop()
	return s.Totals()
}

// readAll reads every message of a topic.
func readAll(t *testing.T, addr, topic string) []kafka.Message {
	t.Helper()
	var out []kafka.Message
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	for p := range len(parts) {
		conn, err := kafka.DialLeader(context.Background(), "tcp", addr, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		err = kafkaread.Partition(context.Background(), conn, 0, func(m kafka.Message) error {
			m.Partition = p
			out = append(out, m)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
	return out
}

// referenceStates replays every events partition through a fresh worker and
// returns its checkpointed key states.
func referenceStates(t *testing.T, addr string, cfg Config) map[string][]byte {
	t.Helper()
	_, states := referenceRun(t, addr, cfg)
	return states
}

// referenceRun runs cfg's pipeline once, uninterrupted, over the events
// topic at addr: it returns each event's prediction by id and each key's
// final state.
func referenceRun(t *testing.T, addr string, cfg Config) (predictions, states map[string][]byte) {
	t.Helper()
	store, _ := checkpoint.NewFileStore(t.TempDir(), 0)
	events := readAll(t, addr, "events")
	predictions, states = map[string][]byte{}, map[string][]byte{}
	for p := 0; p < partitions; p++ {
		w, err := pipeline.NewWorker(cfg.Pipeline, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range events {
			if m.Partition == p {
				w.Process(context.Background(), pipeline.Record{Topic: pipeline.EventsTopic, Partition: p, Offset: m.Offset, Key: m.Key, Value: m.Value})
			}
		}
		for _, o := range w.TakeOutputs() {
			if o.Kind == pipeline.OutPrediction {
				var id struct{ ID string }
				json.Unmarshal(o.Value, &id)
				predictions[id.ID] = o.Value
			}
		}
		w.Checkpoint(context.Background(), store)
		snap, _ := store.Load(context.Background(), p, nil)
		for k, rec := range snap.Keys {
			states[k] = rec.State
		}
	}
	return predictions, states
}

// matchesAnUninterruptedRun fails t unless every event of ids has a
// prediction on the broker, each byte-identical to an uninterrupted run's,
// and the changelog holds every key's state byte-identical to it; it
// returns how many predictions were repeated (identical copies).
func matchesAnUninterruptedRun(t *testing.T, addr string, cfg Config, ids []string) (repeated int) {
	t.Helper()
	want, wantStates := referenceRun(t, addr, cfg)
	got := map[string]int{}
	differing := 0
	for _, m := range readAll(t, addr, "predictions") {
		var id struct{ ID string }
		json.Unmarshal(m.Value, &id)
		got[id.ID]++
		if !bytes.Equal(m.Value, want[id.ID]) {
			differing++
		}
	}
	missing, repeated := deliveries(ids, got)
	states, wrong := changelogStates(t, addr), 0
	for k, b := range wantStates {
		if !bytes.Equal(states[k], b) {
			wrong++
		}
	}
	t.Logf("%d events: %d missing, %d differing predictions, %d repeated; %d keys, %d final states differ", len(ids), missing, differing, repeated, len(wantStates), wrong)
	if missing != 0 || differing != 0 || wrong != 0 || len(states) != len(wantStates) {
		t.Fatalf("%d missing, %d differing predictions, %d wrong final states, %d keys in the changelog for %d", missing, differing, wrong, len(states), len(wantStates))
	}
	return repeated
}

func changelogStates(t *testing.T, addr string) map[string][]byte {
	t.Helper()
	s, _ := checkpoint.NewKafkaStore(&kafka.Dialer{}, []string{addr}, "changelog")
	out := map[string][]byte{}
	for p := 0; p < partitions; p++ {
		snap, err := s.Load(context.Background(), p, nil)
		if err != nil || len(snap.Corrupt) > 0 {
			t.Fatal(err, snap.Corrupt)
		}
		for k, rec := range snap.Keys {
			out[k] = rec.State
		}
	}
	return out
}

// Every event gets exactly one prediction, bad records reach the dead-letter
// topic with a reason, queries are answered by label records, and a stop and
// restart between two batches ends with per-key state bit-identical to one
// uninterrupted run.
func TestServiceOverTCP(t *testing.T) {
	addr := cluster(t)
	cfg := testConfig(t, addr, "g1")
	if _, err := New(context.Background(), cfg); err != nil { // creates the topics
		t.Fatal(err)
	}
	ids := produce(t, addr, 1, 900)
	tot := runUntil(t, cfg, int64(len(ids)))
	if tot.LabelsJoined == 0 || tot.DeadLetters == 0 {
		t.Fatalf("totals %+v", tot)
	}
	ids = append(ids, produce(t, addr, 2, 600)...)
	runUntil(t, cfg, 600) // a new instance resumes from the checkpoints

	preds := predictionsByID(t, addr)
	for _, id := range ids {
		if preds[id] != 1 {
			t.Fatalf("event %s has %d predictions", id, preds[id])
		}
	}
	dead := readAll(t, addr, "dead-letters")
	if len(dead) != 15 {
		t.Fatalf("%d dead letters, want 15", len(dead))
	}
	for _, d := range dead {
		var reason string
		var keys []string
		for _, h := range d.Headers {
			if h.Key == "error" {
				reason = string(h.Value)
			}
			keys = append(keys, h.Key)
		}
		if len(keys) < 4 || !slices.IsSorted(keys) { // a replay writes the same record
			t.Fatalf("dead letter headers %v, want at least 4 in key order", keys)
		}
		if !bytes.Contains([]byte(reason), []byte("malformed JSON")) {
			t.Fatalf("dead letter reason %q", reason)
		}
	}
	want, got := referenceStates(t, addr, cfg), changelogStates(t, addr)
	if len(want) != 20 || len(got) != len(want) {
		t.Fatalf("%d keys in the changelog, %d in the reference", len(got), len(want))
	}
	for k, b := range want {
		if !bytes.Equal(got[k], b) {
			t.Fatalf("key %s: changelog state differs from an uninterrupted run", k)
		}
	}
}

// A labels topic of another partition count than the events topic is
// refused before the service creates any topic.
func TestServiceRefusesUnequalPartitions(t *testing.T) {
	addr := cluster(t)
	conn, _ := kafka.Dial("tcp", addr)
	conn.CreateTopics(kafka.TopicConfig{Topic: "labels", NumPartitions: 2, ReplicationFactor: 1})
	conn.Close()
	cfg := testConfig(t, addr, "g2")
	cfg.Topics.Labels = "labels"
	_, err := New(context.Background(), cfg)
	if err == nil || !errors.Is(err, ErrNotCoPartitioned) || !strings.Contains(err.Error(), "recreate the labels topic with") {
		t.Fatalf("err = %v", err)
	}
	for _, topic := range []string{cfg.Topics.Predictions, cfg.Topics.Changelog} {
		if kafkatest.TopicExists(t, addr, topic) {
			t.Errorf("topic %s was created by a start that was refused", topic)
		}
	}
}

// The topics the service creates take an existing events topic's count
// (8 here, where the configuration says nothing).
func TestServiceTakesTheEventsTopicsPartitionCount(t *testing.T) {
	addr := cluster(t)
	kafkatest.CreateTopic(t, addr, kafka.TopicConfig{Topic: "ev8", NumPartitions: 8, ReplicationFactor: 1})
	cfg := testConfig(t, addr, "g8")
	cfg.Topics.Events, cfg.Partitions = "ev8", 0
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	counts, err := s.partitionCounts(context.Background(), cfg.Topics.all())
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range cfg.Topics.all() {
		if counts[topic] != 8 {
			t.Errorf("topic %s has %d partitions, want the events topic's 8", topic, counts[topic])
		}
	}
}

func TestPlanTopics(t *testing.T) {
	topics := Topics{Events: "ev", Labels: "lb", Predictions: "pred", Queries: "q", DeadLetters: "dl", Alerts: "al", Changelog: "cl"}
	for _, tc := range []struct {
		name       string
		configured int
		existing   map[string]int
		want       int
		errHas     []string // fragments of the refusal, "" for none
	}{
		{"nothing exists, nothing configured", 0, nil, DefaultPartitions, nil},
		{"nothing exists, 6 configured", 6, nil, 6, nil},
		{"events exist", 0, map[string]int{"ev": 8}, 8, nil},
		{"events exist, same count configured", 8, map[string]int{"ev": 8}, 8, nil},
		{"events exist, another count configured", 4, map[string]int{"ev": 8}, 0, []string{"DRIFTSTREAM_PARTITIONS=4", "already has 8", "unset DRIFTSTREAM_PARTITIONS"}},
		{"labels differ", 0, map[string]int{"ev": 8, "lb": 4}, 0, []string{"labels topic lb has 4", "recreate the labels topic with 8"}},
		{"changelog left by a 4-partition start", 0, map[string]int{"ev": 8, "cl": 4, "pred": 4}, 0,
			[]string{"changelog topic cl has 4", "--delete --topic cl", "--alter --topic pred --partitions 8"}},
		{"outputs with more partitions", 0, map[string]int{"ev": 4, "pred": 12, "cl": 4}, 4, nil},
		{"outputs with fewer partitions", 0, map[string]int{"ev": 4, "al": 2}, 0, []string{"output topic al has 2", "--alter --topic al --partitions 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := planTopics(topics, tc.configured, tc.existing, "b:9092")
			if tc.errHas == nil {
				if err != nil || n != tc.want {
					t.Fatalf("planTopics = %d, %v; want %d", n, err, tc.want)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrNotCoPartitioned) {
				t.Fatalf("planTopics = %d, %v; want a refusal", n, err)
			}
			for _, frag := range tc.errHas {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("the refusal does not say %q:\n%v", frag, err)
				}
			}
		})
	}
}

// A second and a third consumer join while the first is working: partitions
// move with their state (checkpointed on revoke, restored on assignment), and
// the end result is bit-identical to an uninterrupted run.
func TestRebalanceMovesPartitionsAndState(t *testing.T) {
	kafkatest.Slow(t)
	for _, cacheKeys := range []int{0, 2} {
		t.Run(fmt.Sprintf("cache-%d", cacheKeys), func(t *testing.T) { rebalances(t, cacheKeys) })
	}
}

// withKeyStore gives cfg a key store of its own holding cacheKeys keys of a
// partition in memory; with 0, cfg is returned as is (every key in memory).
func withKeyStore(t *testing.T, cfg Config, cacheKeys int) Config {
	if cacheKeys > 0 {
		cfg.StateDir, cfg.CacheKeys = t.TempDir(), cacheKeys
	}
	return cfg
}

// noKeyStoresLeft fails t unless every key store under the configs' state
// directories was closed and removed. A test that already failed may have
// left its services running, so it is not checked.
func noKeyStoresLeft(t *testing.T, cfgs ...Config) {
	t.Helper()
	if t.Failed() {
		return
	}
	for _, c := range cfgs {
		if c.StateDir == "" {
			continue
		}
		if left, err := os.ReadDir(c.StateDir); err != nil || len(left) != 0 {
			var names []string
			for _, e := range left {
				names = append(names, e.Name())
			}
			t.Fatalf("state dir %s holds %v after the service stopped (%v)", c.StateDir, names, err)
		}
	}
}

// rebalances is TestRebalanceMovesPartitionsAndState, each member holding
// cacheKeys keys of a partition in memory and the others in a key store
// (all in memory with 0).
func rebalances(t *testing.T, cacheKeys int) {
	addr := cluster(t)
	cfg := testConfig(t, addr, "g-rebalance")
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	ids := produce(t, addr, 3, 1200)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var svcs []*Service
	var dones []chan error
	var cfgs []Config
	start := func() {
		c := withKeyStore(t, cfg, cacheKeys)
		cfgs = append(cfgs, c)
		s, err := New(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		d := make(chan error, 1)
		go func() { d <- s.Run(ctx) }()
		svcs, dones = append(svcs, s), append(dones, d)
	}
	total := func() (n int64) {
		for _, s := range svcs {
			n += s.Totals().Events
		}
		return n
	}
	waitFor := func(n int64) {
		eventually(t, 90*time.Second, func() bool { return total() >= n }, func() string { return fmt.Sprintf("%d of %d events", total(), n) })
	}
	owns := func(s *Service) {
		eventually(t, 60*time.Second, func() bool { return s.Assigned() > 0 }, func() string { return "the newcomer never got a partition" })
	}
	start()
	waitFor(300)
	start() // the group rebalances: partitions move to the newcomer
	owns(svcs[1])
	ids = append(ids, produce(t, addr, 4, 600)...)
	start()
	owns(svcs[2])
	ids = append(ids, produce(t, addr, 5, 600)...)
	waitFor(int64(len(ids)))
	busy := 0
	for _, s := range svcs {
		if s.Totals().Events > 0 {
			busy++
		}
	}
	cancel()
	for _, d := range dones {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if busy < 2 {
		t.Fatalf("only %d of 3 consumers processed events: no partition moved", busy)
	}
	preds := predictionsByID(t, addr)
	for _, id := range ids {
		if preds[id] < 1 {
			t.Fatalf("event %s was never predicted", id)
		}
	}
	want, got := referenceStates(t, addr, cfg), changelogStates(t, addr)
	for k, b := range want {
		if !bytes.Equal(got[k], b) {
			t.Fatalf("key %s: state after rebalances differs from an uninterrupted run", k)
		}
	}
	resumed := svcs[0].Totals().ResumedFromMemory + svcs[1].Totals().ResumedFromMemory + svcs[2].Totals().ResumedFromMemory
	// The first member owns all three partitions, and keeps at least one of
	// them at each rebalance: it resumes it from memory.
	if resumed < 1 {
		t.Fatal("no partition kept by its member across a rebalance resumed from memory")
	}
	noKeyStoresLeft(t, cfgs...)
	t.Logf("events per consumer: %d %d %d; processed in all %d of %d; %d partitions resumed from memory", svcs[0].Totals().Events, svcs[1].Totals().Events,
		svcs[2].Totals().Events, total(), len(ids), resumed)
}

// Consumers killed at random points (no final checkpoint, unflushed outputs
// lost) and restarted: the end state is bit-identical to an uninterrupted
// run (nothing learned twice or lost), and every event is predicted at least
// once, duplicates being identical and bounded by two checkpoint intervals
// per crash ("exactly-once state, at-least-once output").
// With a population model (and a key store of two keys, which evicts it
// too) the same holds: the model and every key seeded from it replay.
func TestCrashesAtRandomPoints(t *testing.T) {
	for _, c := range []struct {
		cacheKeys  int
		population bool
	}{{0, false}, {2, false}, {2, true}} {
		t.Run(fmt.Sprintf("cache-%d/population-%v", c.cacheKeys, c.population), func(t *testing.T) { crashes(t, c.cacheKeys, c.population) })
	}
}

// crashes is TestCrashesAtRandomPoints, with cacheKeys as in rebalances and
// a population model of the keys' learner when population is set.
func crashes(t *testing.T, cacheKeys int, population bool) {
	addr := cluster(t)
	config := func() Config {
		cfg := withKeyStore(t, testConfig(t, addr, "g-crash"), cacheKeys)
		if population {
			cfg.Pipeline.Population = cfg.Pipeline.Learner
		}
		return cfg
	}
	cfg := config()
	cfg.CheckpointEvery = 37
	cfg.CheckpointPeriod = time.Hour // checkpoints only by count: crashes land between them
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	ids := produce(t, addr, 6, 1500)
	r := rand.New(rand.NewPCG(6, 6))
	for round := 0; round < 4; round++ {
		crashAt(t, cfg, int64(100+r.IntN(300)))
	}
	// A last consumer, checkpointing by time too, finishes the stream gracefully.
	last := config()
	s, stop := started(t, last)
	deadline := time.After(60 * time.Second)
	for {
		preds := map[string][]string{}
		for _, m := range readAll(t, addr, "predictions") {
			var p struct{ ID string }
			json.Unmarshal(m.Value, &p)
			preds[p.ID] = append(preds[p.ID], string(m.Value))
		}
		if ok, _ := s.Ready(); len(preds) >= len(ids) && ok {
			dups := 0
			for _, id := range ids {
				ps := preds[id]
				if len(ps) == 0 {
					t.Fatalf("event %s never predicted", id)
				}
				for _, p := range ps[1:] {
					if p != ps[0] { // at-least-once output, but replays are deterministic
						t.Fatalf("event %s: duplicate predictions differ:\n%s\n%s", id, ps[0], p)
					}
				}
				dups += len(ps) - 1
			}
			// A crash before a marker is written repeats at most two checkpoint
			// intervals per partition: the interval the marker closes, and the
			// outputs of the next, written while the marker was (docs/spec/DESIGN.md §4 and
			// the README's "How it works").
			if limit := 4 * partitions * 2 * cfg.CheckpointEvery; dups > limit {
				t.Fatalf("%d duplicate predictions over 4 crashes, more than %d", dups, limit)
			}
			t.Logf("%d duplicate predictions (identical) over 4 crashes", dups)
			break
		}
		select {
		case <-deadline:
			t.Fatalf("timed out: %d of %d events predicted", len(preds), len(ids))
		case <-time.After(50 * time.Millisecond):
		}
	}
	stop()
	noKeyStoresLeft(t, last)
	want, got := referenceStates(t, addr, cfg), changelogStates(t, addr)
	for k, b := range want {
		if !bytes.Equal(got[k], b) {
			t.Fatalf("key %s differs from an uninterrupted run after crashes", k)
		}
	}
}

// crashAt runs a consumer of cfg until it has processed target events (or
// read everything there is: earlier rounds may have left fewer), then
// crashes it as kill -9 would; it returns the crashed service.
func crashAt(t *testing.T, cfg Config, target int64) *Service {
	t.Helper()
	c, store, sink := crashing(t, cfg)
	cfg.Store, cfg.Sink = store, sink
	s, stop := started(t, cfg)
	drained := drainedBy(s)
	eventually(t, 60*time.Second, func() bool { return s.Totals().Events >= target || drained() },
		func() string { return fmt.Sprintf("at %+v, lag %v", s.Totals(), s.Lag()) })
	if n := s.Totals().Events; n < target {
		t.Logf("read everything at %d events, before the target of %d", n, target)
	}
	c.crashed.Store(true)
	stop()
	return s
}

// drainedBy returns a condition that holds once s runs every partition,
// has processed events, shows no lag on any partition, and has processed
// nothing new for 300 ms: it has read everything there is. (A partition's
// lag is 0 until its first record too, hence the quiet period.)
func drainedBy(s *Service) func() bool {
	var last int64
	var since time.Time
	return func() bool {
		if n := s.Totals().Events; n != last || since.IsZero() {
			last, since = n, time.Now()
			return false
		}
		if last == 0 || s.Assigned() != partitions || time.Since(since) < 300*time.Millisecond {
			return false
		}
		for _, l := range s.Lag() {
			if l != 0 {
				return false
			}
		}
		return true
	}
}

// Lag: positive while records wait, 0 once everything is processed.
func TestLagIsComputedByTheService(t *testing.T) {
	addr := cluster(t)
	cfg := testConfig(t, addr, "g-lag")
	cfg.Pipeline.Learner, cfg.Pipeline.Params = "sop-ss", nil // slower per record than lasec-ss: lag builds up
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	ids := produce(t, addr, 7, 3000)
	s, stop := started(t, cfg)
	sawLag := false
	deadline := time.After(60 * time.Second)
	for s.Totals().Events < int64(len(ids)) {
		for _, l := range s.Lag() {
			sawLag = sawLag || l > 0
		}
		select {
		case <-deadline:
			t.Fatal("timed out")
		case <-time.After(time.Millisecond):
		}
	}
	// The label records and bad records after the last event go too.
	eventually(t, 30*time.Second, func() bool {
		lags := s.Lag()
		for _, l := range lags {
			if l != 0 {
				return false
			}
		}
		return len(lags) == partitions
	}, func() string { return fmt.Sprintf("lags %v", s.Lag()) })
	lags := s.Lag()
	stop()
	if !sawLag {
		t.Fatal("lag never rose above 0 while 3000 events were waiting")
	}
	if len(lags) != partitions {
		t.Fatalf("lag for %d partitions, want %d", len(lags), partitions)
	}
	for p, l := range lags {
		if l != 0 {
			t.Fatalf("partition %d: lag %d after everything was processed", p, l)
		}
	}
}

// A corrupted changelog record is reported at restore, and the service
// recovers by replaying from further back: the end state is bit-identical.
func TestServiceRecoversFromCorruptChangelog(t *testing.T) {
	addr := cluster(t)
	cfg := testConfig(t, addr, "g-corrupt")
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	ids := produce(t, addr, 8, 900)
	runUntil(t, cfg, int64(len(ids)))
	// Garble the latest checkpoint of one key in every partition.
	victims := map[int]string{}
	for _, m := range readAll(t, addr, "changelog") {
		if !bytes.HasPrefix(m.Key, []byte("\x00")) {
			victims[m.Partition] = string(m.Key)
		}
	}
	for p, key := range victims {
		w, err := kafka.DialLeader(context.Background(), "tcp", addr, "changelog", p)
		if err != nil {
			t.Fatal(err)
		}
		w.WriteMessages(kafka.Message{Key: []byte(key), Value: []byte("not a checkpoint record")})
		w.Close()
	}
	produce(t, addr, 9, 300)
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	runUntil(t, cfg, 300)
	if !bytes.Contains(logs.Bytes(), []byte("checkpoint record set aside")) {
		t.Fatalf("corruption not reported; log:\n%s", logs.String())
	}
	want := referenceStates(t, addr, cfg)
	got := changelogStates(t, addr)
	for k, b := range want {
		if !bytes.Equal(got[k], b) {
			t.Fatalf("key %s differs after recovering from a corrupt record", k)
		}
	}
}

// Labels on a separate co-partitioned topic join their events.
func TestSeparateLabelsTopic(t *testing.T) {
	addr := cluster(t)
	cfg := testConfig(t, addr, "g-labels")
	cfg.Topics.Labels = "labels"
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	ew := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	lw := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "labels", Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer ew.Close()
	defer lw.Close()
	r := rand.New(rand.NewPCG(10, 1))
	var events, labels []kafka.Message
	for i := 0; i < 600; i++ {
		key := []byte(fmt.Sprintf("k%d", i%9))
		x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		y := 1
		if x[0] < 0 {
			y = -1
		}
		xs, _ := json.Marshal(x)
		events = append(events, kafka.Message{Key: key, Value: []byte(fmt.Sprintf(`{"id":"e%d","x":%s}`, i, xs))})
		labels = append(labels, kafka.Message{Key: key, Value: []byte(fmt.Sprintf(`{"id":"e%d","label":%d}`, i, y))})
	}
	if err := ew.WriteMessages(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	if err := lw.WriteMessages(context.Background(), labels...); err != nil {
		t.Fatal(err)
	}
	s, stop := started(t, cfg)
	// Every label joins its event, whichever came first.
	eventually(t, 60*time.Second, func() bool { return s.Totals().Events >= 600 && s.Totals().LabelsJoined >= 600 }, func() string { return fmt.Sprintf("%+v", s.Totals()) })
	tot := s.Totals()
	stop()
	// Whichever topic the readers deliver first, labels join their events:
	// early ones wait in the key's state, late ones answer a pending query.
	if tot.Events != 600 || tot.LabelsJoined == 0 || tot.LabelsJoined > 600 {
		t.Fatalf("totals %+v", tot)
	}
	// Every label came apart from its event, and every joined one is scored.
	if tot.Labeled != tot.LabelsJoined || tot.Mistakes == 0 || tot.Mistakes >= tot.Labeled {
		t.Fatalf("delayed labels not scored: %+v", tot)
	}
}

// eventually is poll.Until.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, what func() string) {
	t.Helper()
	poll.Until(t, timeout, cond, what)
}

// started is a service running in the background until stop is called;
// stop waits for Run to return and fails the test on its error.
func started(t *testing.T, cfg Config) (s *Service, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return s, func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// The topics the service creates carry StreamTopicConfig, except the
// changelog, which is compacted and keeps its records for good.
func TestStreamTopicConfig(t *testing.T) {
	addr := cluster(t)
	cfg := testConfig(t, addr, "g-topic-config")
	cfg.StreamTopicConfig = map[string]string{"retention.ms": "12345"}
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	cl := &kafka.Client{Addr: kafka.TCP(addr)}
	for topic, want := range map[string]string{"events": "12345", "predictions": "12345", "dead-letters": "12345", "changelog": ""} {
		resp, err := cl.DescribeConfigs(context.Background(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"retention.ms", "cleanup.policy", "segment.bytes", "segment.ms", "min.cleanable.dirty.ratio"}}}})
		if err != nil || len(resp.Resources) != 1 {
			t.Fatalf("%s: %v", topic, err)
		}
		got := map[string]string{}
		for _, e := range resp.Resources[0].ConfigEntries {
			got[e.ConfigName] = e.ConfigValue
		}
		if want != "" && got["retention.ms"] != want || want == "" && (got["retention.ms"] == "12345" || got["cleanup.policy"] != "compact") {
			t.Fatalf("%s: %v", topic, got)
		}
		// The changelog's segments close often enough for compaction to
		// keep restores near the live state.
		if want == "" && (got["segment.bytes"] != "67108864" || got["segment.ms"] != "600000" || got["min.cleanable.dirty.ratio"] != "0.25") {
			t.Fatalf("changelog: %v", got)
		}
	}
}

// An existing changelog whose segments the broker seldom closes is named
// at start, with the command that sets the service's values.
func TestServiceWarnsOfAChangelogThatSeldomCompacts(t *testing.T) {
	addr := cluster(t)
	kafkatest.CreateTopic(t, addr, kafka.TopicConfig{Topic: "changelog", NumPartitions: partitions, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"},
			{ConfigName: "segment.bytes", ConfigValue: "1073741824"}, {ConfigName: "segment.ms", ConfigValue: "604800000"}}})
	for _, big := range []bool{true, false} {
		var log bytes.Buffer
		cfg := testConfig(t, addr, "g-seg")
		cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
		if _, err := New(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		warned := strings.Contains(log.String(), "segment.bytes=67108864,segment.ms=600000,min.cleanable.dirty.ratio=0.25")
		if warned != big {
			t.Fatalf("segments of 1 GiB: %v; warned: %v\n%s", big, warned, log.String())
		}
		cl := &kafka.Client{Addr: kafka.TCP(addr)}
		if _, err := cl.IncrementalAlterConfigs(context.Background(), &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: "changelog", Configs: []kafka.IncrementalAlterConfigsRequestConfig{
				{Name: "segment.bytes", Value: "67108864", ConfigOperation: kafka.ConfigOperationSet},
				{Name: "segment.ms", Value: "600000", ConfigOperation: kafka.ConfigOperationSet}}}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// An input record is bounded by its topic's max.message.bytes unless
// DRIFTSTREAM_MAX_EVENT_BYTES says otherwise: on a topic that holds records
// of up to 3 MiB, a valid 2 MiB event is predicted; with a 64 KiB setting
// it is dead-lettered as too large.
func TestServiceBoundsInputsByTheirTopic(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setting  int
		predicts bool
	}{{"topic limit", 0, true}, {"setting", 64 << 10, false}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := kafkatest.Cluster(t, kfake.SeedTopics(-1), kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(4 << 20)})).ListenAddrs()[0]
			kafkatest.CreateTopic(t, addr, kafka.TopicConfig{Topic: "events", NumPartitions: partitions, ReplicationFactor: 1,
				ConfigEntries: []kafka.ConfigEntry{{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(3 << 20)}}})
			big := fmt.Sprintf(`{"id":"big","x":[1,2,3],"label":1%s}`, strings.Repeat(" ", 2<<20))
			w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", Balancer: kafka.Murmur2Balancer{}, BatchBytes: 4 << 20, RequiredAcks: kafka.RequireAll}
			if err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte("k"), Value: []byte(big)},
				kafka.Message{Key: []byte("k"), Value: []byte(`{"id":"small","x":[1,2,3],"label":1}`)}); err != nil {
				t.Fatal(err)
			}
			w.Close()
			cfg := testConfig(t, addr, "gbig")
			cfg.Partitions = 0
			cfg.Pipeline.MaxBytes = tc.setting
			s, stop := started(t, cfg)
			eventually(t, 60*time.Second, func() bool { return s.Totals().Events+s.Totals().DeadLetters >= 2 }, func() string { return fmt.Sprintf("%+v", s.Totals()) })
			stop()
			tot := s.Totals()
			wantEvents, wantDead := int64(1), int64(1)
			if tc.predicts {
				wantEvents, wantDead = 2, 0
			}
			if tot.Events != wantEvents || tot.Predictions != wantEvents || tot.DeadLetters != wantDead {
				t.Fatalf("%d events, %d predictions, %d dead letters; want %d, %d, %d", tot.Events, tot.Predictions, tot.DeadLetters, wantEvents, wantEvents, wantDead)
			}
		})
	}
}

// Partitions added to the events topic while the service runs are
// reported, never silently unread: the service turns unready, saying why,
// and counts them in driftstream_unread_input_partitions, while the
// partitions it holds keep running.
func TestServiceReportsAGrownInputTopic(t *testing.T) {
	addr := cluster(t)
	cfg := testConfig(t, addr, "g-grow")
	cfg.TopicCheckInterval = 50 * time.Millisecond
	s, stop := started(t, cfg)
	defer stop()
	produce(t, addr, 1, 60)
	eventually(t, 30*time.Second, func() bool { ok, _ := s.Ready(); return ok && s.Totals().Events >= 60 },
		func() string { _, why := s.Ready(); return why })
	client := &kafka.Client{Addr: kafka.TCP(addr)}
	res, err := client.CreatePartitions(context.Background(), &kafka.CreatePartitionsRequest{
		Topics: []kafka.TopicPartitionsConfig{{Name: "events", Count: partitions + 2}}})
	if err != nil || res.Errors["events"] != nil {
		t.Fatalf("grow the events topic: %v %v", err, res)
	}
	eventually(t, 30*time.Second, func() bool { ok, _ := s.Ready(); return !ok }, func() string { return "still ready" })
	if _, why := s.Ready(); !strings.Contains(why, "events has 5 partitions, the service started with 3") || !strings.Contains(why, "When an input topic grows") {
		t.Fatalf("unready for: %s", why)
	}
	if n := s.unreadPartitions.Load(); n != 2 {
		t.Fatalf("%d unread partitions, want 2", n)
	}
	produce(t, addr, 2, 30) // the partitions held keep running
	eventually(t, 30*time.Second, func() bool { return s.Totals().Events > 60 }, func() string { return fmt.Sprintf("%+v", s.Totals()) })
}

// A record's W3C trace context (traceparent, tracestate) is passed on to
// each of its outputs: its prediction, and the dead letter of a bad one.
func TestServicePassesTheTraceContextOn(t *testing.T) {
	addr := cluster(t)
	cfg := testConfig(t, addr, "g-trace")
	s, stop := started(t, cfg)
	defer stop()
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", Balancer: kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll}
	trace := []kafka.Header{{Key: "traceparent", Value: []byte(parent)}, {Key: "tracestate", Value: []byte("vendor=x")}}
	if err := w.WriteMessages(context.Background(),
		kafka.Message{Key: []byte("k"), Value: []byte(`{"id":"t1","x":[1,2,3],"label":1}`), Headers: trace},
		kafka.Message{Key: []byte("k"), Value: []byte(`{"id":"t2","x":[1,2`), Headers: trace},
		kafka.Message{Key: []byte("k"), Value: []byte(`{"id":"t3","x":[1,2,3]}`)}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	eventually(t, 30*time.Second, func() bool {
		return len(readAll(t, addr, "predictions")) == 2 && len(readAll(t, addr, "dead-letters")) == 1
	},
		func() string { return fmt.Sprintf("%+v", s.Totals()) })
	header := func(m kafka.Message, k string) string {
		for _, h := range m.Headers {
			if h.Key == k {
				return string(h.Value)
			}
		}
		return ""
	}
	for _, m := range append(readAll(t, addr, "predictions"), readAll(t, addr, "dead-letters")...) {
		traced := !bytes.Contains(m.Value, []byte(`"t3"`))
		if got := header(m, "traceparent"); (got == parent) != traced || (header(m, "tracestate") == "vendor=x") != traced {
			t.Errorf("output %s: traceparent %q, tracestate %q (the input traced: %v)", m.Value, got, header(m, "tracestate"), traced)
		}
	}
}

// A checkpoint limit below the checkpoint interval is refused by New, before
// any broker is asked, not by each partition's runner once assigned.
func TestServiceRefusesACheckpointLimitBelowTheInterval(t *testing.T) {
	cfg := testConfig(t, "127.0.0.1:1", "g")
	cfg.CheckpointEvery, cfg.CheckpointMaxEvery = 100, 50
	_, err := New(context.Background(), cfg)
	if err == nil || err.Error() != "checkpoint at most every 50 records, fewer than every 100: set it to 0 (10 times the interval) or at least the interval" {
		t.Fatalf("err %v", err)
	}
}
