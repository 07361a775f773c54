package backtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/internal/poll"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/service"
	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

const partitions = 3

// drifting is a keyed history: n events over keys entities whose target
// flips halfway.
type drifting struct {
	r    *rand.Rand
	n, i int
	keys int
}

func newDrifting(seed uint64, n, keys int) *drifting {
	return &drifting{r: rand.New(rand.NewPCG(seed, 5)), n: n, keys: keys}
}

func (d *drifting) Dim() int { return 4 }

func (d *drifting) Next(context.Context) (streams.Example, error) {
	if d.i == d.n {
		return streams.Example{}, io.EOF
	}
	x := []float64{d.r.NormFloat64(), d.r.NormFloat64(), d.r.NormFloat64(), d.r.NormFloat64()}
	m := x[0] - x[1] + 0.5*x[2]
	if d.i > d.n/2 {
		m = -m
	}
	y := 1
	if m < 0 {
		y = -1
	}
	v, _ := learners.NewDense(x)
	ex := streams.Example{ID: fmt.Sprintf("e%d", d.i), Key: fmt.Sprintf("k%d", d.r.IntN(d.keys)), X: v, Label: y}
	d.i++
	return ex, nil
}

func pipelineConfig(t *testing.T, learner, params string) pipeline.Config {
	t.Helper()
	vec, err := topics.NewVectorizer(4, 0)
	if err != nil {
		t.Fatal(err)
	}
	return pipeline.Config{Settings: keyed.Settings{Learner: learner, Params: json.RawMessage(params), Seed: 5, Vector: vec, QueryScale: 1, MaxPending: 100, PendingTTL: 5000}}
}

// collector keeps every prediction by id.
type collector struct {
	mu    sync.Mutex
	preds map[string][]byte
}

func (c *collector) outputs(_ int, outs []pipeline.Output) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range outs {
		if o.Kind == pipeline.OutPrediction {
			var id struct{ ID string }
			json.Unmarshal(o.Value, &id)
			c.preds[id.ID] = o.Value
		}
	}
	return nil
}

// Same code, same answer: a keyed history with delayed labels, written to a
// topic as the producer writes it and run through the service, gives the
// same predictions, id by id and byte for byte, and the same counters as a
// backtest of the same source and as a backtest of the topic range.
//
// With the labels on a topic of their own (separate), the producer stamps
// the records (MessageOptions.Clock), the service and the topic backtest
// merge the two topics by timestamp, and the backtest of the source, which
// takes its records in the order Messages emits them, still agrees with
// both, byte for byte.
func TestSameCodeSameAnswer(t *testing.T) {
	const n, keys = 3000, 40
	for _, tc := range []struct {
		learner, params string
		separate        bool
	}{{"lasec-ss", `{"a":0.5}`, false}, {"perceptron", ``, false}, {"perceptron", ``, true}, {"lasec-ss", `{"a":0.5}`, true}} {
		t.Run(fmt.Sprintf("%s/separate=%v", tc.learner, tc.separate), func(t *testing.T) {
			opts := MessageOptions{Keys: keys, LabelsDelay: 7}
			labels := ""
			if tc.separate {
				opts.Clock, labels = time.Now().Add(-time.Hour).Truncate(time.Millisecond), "labels"
			}
			c := kafkatest.Cluster(t, kfake.SeedTopics(partitions, "events", "labels"))
			addr := c.ListenAddrs()[0]
			produceHistory(t, addr, newDrifting(1, n, keys), opts)
			pcfg := pipelineConfig(t, tc.learner, tc.params)

			served, st := serve(t, addr, pcfg, labels, n, n)

			// The backtests: the source itself, and the topic range.
			fromSource, err := FromSource(newDrifting(1, n, keys), MessageOptions{Keys: keys, LabelsDelay: 7}, partitions, tc.separate)
			if err != nil {
				t.Fatal(err)
			}
			fromTopic, err := FromTopic(context.Background(), TopicRange{Brokers: []string{addr}, Topic: "events", LabelsTopic: labels, From: Unbounded, To: Unbounded})
			if err != nil {
				t.Fatal(err)
			}
			for name, in := range map[string]Input{"file": fromSource, "topic": fromTopic} {
				rep := sameAsServed(t, name, pcfg, in, served, n)
				tot := rep.Totals
				if tot.Events != st.Events || tot.Labeled != st.Labeled || tot.Mistakes != st.Mistakes || tot.Queries != st.Queries {
					t.Fatalf("%s backtest totals %+v, service %+v", name, tot, st)
				}
				if tot.Labeled == 0 || tot.DelayedLabeled == 0 {
					t.Fatalf("%s: nothing scored: %+v", name, tot)
				}
				// One query rate: the labels the learner asked for (all of
				// them for the perceptron); label requests apart.
				ev := float64(tot.Events)
				if rep.QueryRate != float64(tot.Asked)/ev || (tc.learner == "perceptron") != (rep.QueryRate == 1) || rep.RequestRate != float64(tot.Queries)/ev || rep.RequestRate == 0 {
					t.Fatalf("%s: query rate %v, label request rate %v; totals %+v", name, rep.QueryRate, rep.RequestRate, tot)
				}
				t.Logf("%s backtest = service: %d predictions identical; accuracy %.4f over %d labeled (%d delayed), %d keys", name, n, rep.Accuracy, tot.Labeled, tot.DelayedLabeled, rep.Keys)
			}
		})
	}
}

// sameAsServed replays in and fails t unless it predicts n events, each
// prediction byte for byte the one served.
func sameAsServed(t *testing.T, name string, pcfg pipeline.Config, in Input, served map[string][]byte, n int) *Report {
	t.Helper()
	col := &collector{preds: map[string][]byte{}}
	rep, err := Replay(context.Background(), ReplayConfig{Name: name, Pipeline: pcfg, Outputs: col.outputs}, in)
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for id, want := range served {
		if !bytes.Equal(col.preds[id], want) {
			if differ++; differ <= 3 {
				t.Logf("%s: backtest %s\nservice %s", id, col.preds[id], want)
			}
		}
	}
	if len(col.preds) != n || differ != 0 {
		t.Fatalf("%s backtest: %d predictions, %d differ from the service's %d", name, len(col.preds), differ, len(served))
	}
	return rep
}

// serve runs the service on the topics "events" (and labels, when named)
// at addr until it predicted n events and scored labeled of them, and
// returns its predictions by id and its totals.
func serve(t *testing.T, addr string, pcfg pipeline.Config, labels string, n, labeled int) (map[string][]byte, service.Totals) {
	t.Helper()
	svc, err := service.New(context.Background(), service.Config{Brokers: []string{addr}, Group: "g", Partitions: partitions, Replication: 1,
		Topics:   service.Topics{Events: "events", Labels: labels, Predictions: "predictions", Queries: "label-queries", DeadLetters: "dead-letters", Changelog: "changelog"},
		Pipeline: pcfg, CheckpointEvery: 200, CheckpointPeriod: 100 * time.Millisecond, MergeWait: service.DefaultMergeWait})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	// Every event in and scored: the trailing label records too.
	poll.Until(t, 60*time.Second, func() bool { st := svc.Totals(); return st.Events >= int64(n) && st.Labeled >= int64(labeled) },
		func() string { return fmt.Sprintf("the service's %d events, %d scored: %+v", n, labeled, svc.Totals()) })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	served := map[string][]byte{}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: "predictions", GroupID: "read", StartOffset: kafka.FirstOffset, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	for len(served) < n {
		m, err := r.ReadMessage(rctx)
		if err != nil {
			t.Fatalf("read predictions: %v (%d of %d)", err, len(served), n)
		}
		var id struct{ ID string }
		json.Unmarshal(m.Value, &id)
		served[id.ID] = m.Value
	}
	return served, svc.Totals()
}

// produceHistory writes src's messages (Messages with opts) to the topic
// "events" at addr as cmd/producer does: murmur2 partitioning, in order,
// acks=all, in batches of 5,000; with opts.Clock set, label records go to
// the topic "labels" and every record carries its stamp (cmd/producer's
// -labels-topic).
func produceHistory(tb testing.TB, addr string, src streams.Source, opts MessageOptions) {
	tb.Helper()
	writer := func(topic string) *kafka.Writer {
		return &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, BatchSize: 5000, RequiredAcks: kafka.RequireAll}
	}
	ws := map[bool]*kafka.Writer{false: writer("events"), true: writer("events")}
	if !opts.Clock.IsZero() {
		ws[true] = writer("labels")
	}
	batches := map[bool][]kafka.Message{}
	flush := func(labels bool) error {
		err := ws[labels].WriteMessages(context.Background(), batches[labels]...)
		batches[labels] = batches[labels][:0]
		return err
	}
	if _, err := Messages(context.Background(), src, opts, func(m Message) error {
		separate := m.Labels && !opts.Clock.IsZero()
		if batches[separate] = append(batches[separate], kafka.Message{Key: m.Key, Value: m.Value, Time: m.Time}); len(batches[separate]) == 5000 {
			return flush(separate)
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	for _, labels := range []bool{false, true} {
		if err := flush(labels); err != nil {
			tb.Fatal(err)
		}
		ws[labels].Close()
	}
}

// With the shared part across partitions, the service — each partition
// reading every partition of the events topic, merged by record timestamp —
// and a backtest of the same source give the same predictions, byte for
// byte, when the records' timestamps increase along the history (the
// producer's stamps here are 1 ms apart): the backtest deals every
// partition the other partitions' records in the history's order. Every
// partition's shared part learns the other partitions' labeled events,
// inline or joined to the label records that come later (on the events
// topic, or on a labels topic of their own): (partitions − 1) × the
// labeled events in all; a backtest of the topics, which reads them as the
// service does, agrees too.
func TestSharedAcrossPartitionsSameAnswer(t *testing.T) {
	const n, keys = 3000, 40
	for _, tc := range []struct {
		delay    int
		separate bool
	}{{0, false}, {7, false}, {7, true}} {
		t.Run(fmt.Sprintf("delay=%d/separate=%v", tc.delay, tc.separate), func(t *testing.T) {
			opts := MessageOptions{Keys: keys, LabelsDelay: tc.delay}
			c := kafkatest.Cluster(t, kfake.SeedTopics(partitions, "events", "labels"))
			addr := c.ListenAddrs()[0]
			writer := func(topic string) *kafka.Writer {
				return &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, BatchSize: 5000, RequiredAcks: kafka.RequireAll}
			}
			msgs := map[bool][]kafka.Message{}
			clock, stamped := time.Now().Add(-time.Hour).Truncate(time.Millisecond), 0
			if _, err := Messages(context.Background(), newDrifting(2, n, keys), opts, func(m Message) error {
				separate := m.Labels && tc.separate
				msgs[separate] = append(msgs[separate], kafka.Message{Key: m.Key, Value: m.Value, Time: clock.Add(time.Duration(stamped) * time.Millisecond)})
				stamped++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for separate, topic := range map[bool]string{false: "events", true: "labels"} {
				w := writer(topic)
				if err := w.WriteMessages(context.Background(), msgs[separate]...); err != nil && len(msgs[separate]) > 0 {
					t.Fatal(err)
				}
				w.Close()
			}
			pcfg := pipelineConfig(t, "logreg", "")
			pcfg.Population, pcfg.SharedAcrossPartitions = keyed.PopulationAdditive, true
			labels := ""
			if tc.separate {
				labels = "labels"
			}

			served, st := serve(t, addr, pcfg, labels, n, n)

			fromSource, err := FromSource(newDrifting(2, n, keys), opts, partitions, tc.separate)
			if err != nil {
				t.Fatal(err)
			}
			fromTopic, err := FromTopic(context.Background(), TopicRange{Brokers: []string{addr}, Topic: "events", LabelsTopic: labels, From: Unbounded, To: Unbounded})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range []struct {
				name string
				in   Input
			}{{"source", fromSource}, {"topic", fromTopic}} {
				rep := sameAsServed(t, in.name, pcfg, in.in, served, n)
				tot := rep.Totals
				want := (partitions - 1) * tot.Labeled
				if tot.PeerLearned != want || st.PeerLearned != want || tot.Labeled != n || st.Mistakes != tot.Mistakes {
					t.Fatalf("%s backtest: the other partitions' labels learned: backtest %d, service %d, want %d (labeled %d, mistakes %d and %d)", in.name, tot.PeerLearned, st.PeerLearned, want, tot.Labeled, tot.Mistakes, st.Mistakes)
				}
				t.Logf("service = %s backtest with the shared part across %d partitions: %d predictions identical, accuracy %.4f, %d of the other partitions' labels learned", in.name, partitions, n, rep.Accuracy, tot.PeerLearned)
			}
		})
	}
}
