package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
)

// produceWithLabels writes keys × perKey events to "events" and each one's
// label to "labels" 30 to 80 of its key's events later, every record with
// a timestamp (an event's time; a label's, that of the event it follows),
// the labels topic in timestamp order: the deployment where labels come
// from another system. It returns the events' count.
func produceWithLabels(t *testing.T, addr string, keys, perKey int) int {
	t.Helper()
	r := rand.New(rand.NewPCG(47, 1))
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var events, labels []kafka.Message
	for i := range perKey {
		for k := range keys {
			n := i*keys + k // the event's place in time
			key := []byte(fmt.Sprintf("k%02d", k))
			x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
			y := 1
			if x[0]+0.5*x[1] < 0 {
				y = -1
			}
			if r.IntN(10) == 0 {
				y = -y
			}
			xs, _ := json.Marshal(x)
			at := base.Add(time.Duration(n) * time.Millisecond)
			events = append(events, kafka.Message{Key: key, Time: at, Value: fmt.Appendf(nil, `{"id":"e%d","x":%s}`, i, xs)})
			later := base.Add(time.Duration(n+(30+r.IntN(51))*keys) * time.Millisecond)
			labels = append(labels, kafka.Message{Key: key, Time: later, Value: fmt.Appendf(nil, `{"id":"e%d","label":%d}`, i, y)})
		}
	}
	slices.SortStableFunc(labels, func(a, b kafka.Message) int { return a.Time.Compare(b.Time) })
	kafkatest.Write(t, addr, "events", events)
	kafkatest.Write(t, addr, "labels", labels)
	return len(events)
}

// With labels on a topic of their own, a partition's events and labels meet
// in the order of their record timestamps (pipeline.Merge), whatever the
// fetches' timing: a consumer killed at five random points and restarted
// predicts every event exactly as an uninterrupted one does (duplicates
// identical) and ends with the same key states. Before the merge, the order
// followed the fetches, and runs differed.
func TestLabelsTopicReplaysTheMerge(t *testing.T) {
	type result struct {
		preds, backtest map[string]string
		states          map[string][]byte
		went            int64
	}
	run := func(crashes int) result {
		addr := cluster(t)
		cfg := testConfig(t, addr, "g-merge")
		cfg.Topics.Labels = "labels"
		cfg.CheckpointEvery = 37
		cfg.CheckpointPeriod = time.Hour // checkpoints only by count: crashes land between them
		if _, err := New(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		n := produceWithLabels(t, addr, 24, 120)
		r := rand.New(rand.NewPCG(uint64(crashes), 3))
		var went int64
		for range crashes {
			went += mergesWentOn(crashAt(t, cfg, int64(200+r.IntN(400))))
		}
		s, stop := started(t, cfg)
		drained := drainedBy(s)
		eventually(t, 60*time.Second, func() bool {
			for _, l := range s.LabelsLag() {
				if l != 0 {
					return false
				}
			}
			return drained()
		}, func() string { return fmt.Sprintf("%+v, lag %v, labels lag %v", s.Totals(), s.Lag(), s.LabelsLag()) })
		time.Sleep(300 * time.Millisecond) // the last labels, processed after the last events
		stop()
		went += mergesWentOn(s)
		res := result{preds: map[string]string{}, states: changelogStates(t, addr), went: went}
		if crashes == 0 { // a topic backtest of the same two topics predicts what the service did
			res.backtest = topicBacktest(t, addr, cfg)
		}
		defer func() {
			if len(res.preds) != n {
				t.Fatalf("%d crashes: %d of %d events predicted", crashes, len(res.preds), n)
			}
		}()
		for _, m := range readAll(t, addr, "predictions") {
			var p struct{ Key, ID string }
			json.Unmarshal(m.Value, &p)
			id := p.Key + "/" + p.ID
			if prev, ok := res.preds[id]; ok && prev != string(m.Value) {
				t.Fatalf("%d crashes: event %s predicted twice, differently:\n%s\n%s", crashes, id, prev, m.Value)
			}
			res.preds[id] = string(m.Value)
		}
		return res
	}
	clean, crashed := run(0), run(5)
	if clean.went != 0 || crashed.went != 0 {
		t.Fatalf("the merges went on without an input %d and %d times: the runs are not comparable", clean.went, crashed.went)
	}
	differ := 0
	for id, p := range clean.preds {
		if crashed.preds[id] != p {
			differ++
		}
	}
	if differ > 0 || len(crashed.preds) != len(clean.preds) {
		t.Fatalf("%d of %d events predicted differently after 5 crashes (%d predicted)", differ, len(clean.preds), len(crashed.preds))
	}
	for k, b := range clean.states {
		if !bytes.Equal(crashed.states[k], b) {
			t.Fatalf("key %s ends differently after 5 crashes", k)
		}
	}
	if len(clean.states) < 24 {
		t.Fatalf("%d key states", len(clean.states))
	}
	differ = 0
	for id, p := range clean.preds {
		if clean.backtest[id] != p {
			differ++
		}
	}
	if differ > 0 || len(clean.backtest) != len(clean.preds) {
		t.Fatalf("a topic backtest of the two topics predicted %d of %d events otherwise than the service (%d predicted)", differ, len(clean.preds), len(clean.backtest))
	}
}

// topicBacktest replays the cluster's events and labels topics as a topic
// backtest (cmd/consumer backtest -topic events -labels-topic labels) with
// the service's pipeline configuration and returns its predictions by
// key/id.
func topicBacktest(t *testing.T, addr string, cfg Config) map[string]string {
	t.Helper()
	in, err := backtest.FromTopic(context.Background(), backtest.TopicRange{Brokers: []string{addr}, Topic: "events", LabelsTopic: "labels", From: backtest.Unbounded, To: backtest.Unbounded})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	preds := map[string]string{}
	collect := func(_ int, outs []pipeline.Output) error {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range outs {
			if o.Kind == pipeline.OutPrediction {
				var p struct{ Key, ID string }
				json.Unmarshal(o.Value, &p)
				preds[p.Key+"/"+p.ID] = string(o.Value)
			}
		}
		return nil
	}
	if _, err := backtest.Replay(context.Background(), backtest.ReplayConfig{Name: "merge", Pipeline: cfg.Pipeline, Outputs: collect}, in); err != nil {
		t.Fatal(err)
	}
	return preds
}

// mergesWentOn is the service's count of merges that went on without an
// input.
func mergesWentOn(s *Service) int64 {
	var n int64
	for _, v := range s.count.mergesWentOn() {
		n += v
	}
	return n
}
