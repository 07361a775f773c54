package main

import (
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

// writeWithLabels writes n unlabeled events over keys to events and each
// one's label to labels 30–80 events later in time, every record with its
// timestamp, the labels topic in timestamp order; both with one
// partitioner, as co-partitioned topics are written. It returns the ids.
func writeWithLabels(t *testing.T, addr, events, labels string, keys, n int) []string {
	t.Helper()
	r := rand.New(rand.NewPCG(47, 47))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var evs, lbs []kafka.Message
	var ids []string
	for i := range n {
		key := []byte(fmt.Sprintf("k%d", r.IntN(keys)))
		x, y := labeledPoint(r)
		if r.IntN(10) == 0 {
			y = -y
		}
		id := fmt.Sprintf("e%d", i)
		ids = append(ids, id)
		xs, _ := json.Marshal(x)
		at := base.Add(time.Duration(i) * time.Millisecond)
		evs = append(evs, kafka.Message{Key: key, Time: at, Value: fmt.Appendf(nil, `{"id":%q,"x":%s}`, id, xs)})
		lbs = append(lbs, kafka.Message{Key: key, Time: at.Add(time.Duration(30+r.IntN(51)) * time.Millisecond), Value: fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, y)})
	}
	slices.SortStableFunc(lbs, func(a, b kafka.Message) int { return a.Time.Compare(b.Time) })
	kafkatest.Write(t, addr, events, evs)
	kafkatest.Write(t, addr, labels, lbs)
	return ids
}

// Labels on a topic of their own, consumers killed with SIGKILL five times
// (during restores and while processing) and a last one finishing: every
// event's prediction, duplicates included, is the one a topic backtest of
// the two topics makes (the partition's merge by record timestamp replays
// after every kill), and every event is predicted. On the in-process broker
// and, with DRIFTSTREAM_KAFKA_ADDR, on a real one (scripts/integration.sh).
func TestBlackBoxKill9WithLabelsTopic(t *testing.T) {
	killedLikeTheBacktest(t, 10, 300*time.Millisecond)
}

// The same with one shared part across partitions (the additive model,
// every partition also reading the others' events and labels topics,
// merged by timestamp): after the kills, every prediction is the one a
// topic backtest with the shared part across partitions makes — each
// restore resumed the other partitions' reading at its marker's cut, and
// the shared part skipped what it had learned. Each partition reads every
// partition, so a consumer takes longer to get going: the kills come up to
// 0.8 s after a restore.
func TestBlackBoxKill9SharedAcrossPartitions(t *testing.T) {
	killedLikeTheBacktest(t, 11, 800*time.Millisecond, "-learner", "logreg", "-learner-params", "{}", "-population", "additive", "-shared-across-partitions")
}

// killedLikeTheBacktest runs TestBlackBoxKill9WithLabelsTopic's kills
// (their timing drawn from seed, up to spread after a restore) with the
// consumers' arguments extra.
func killedLikeTheBacktest(t *testing.T, seed uint64, spread time.Duration, extra ...string) {
	b := newBlackBox(t)
	kafkatest.CreateTopic(t, b.addr, kafka.TopicConfig{Topic: b.topic("labels"), NumPartitions: blackBoxPartitions, ReplicationFactor: 1})
	b.args = append(append(b.args, "-labels-topic", b.topic("labels")), extra...)
	ids := writeWithLabels(t, b.addr, b.topic("events"), b.topic("labels"), 120, 60000)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range 5 {
		before := len(b.predicted())
		p := b.start()
		if i%4 != 3 { // some kills land during restore, most while processing: once it wrote predictions
			waitFor(t, 60*time.Second, "partitions restored", func() bool { return p.count(`"partition restored"`) >= 1 })
			waitFor(t, 60*time.Second, "processing began", func() bool { return len(b.predicted()) > before || before == len(ids) })
		}
		time.Sleep(20*time.Millisecond + time.Duration(r.Int64N(int64(spread)))) // the records are all there: a consumer is through them in seconds
		p.kill(t)
		t.Logf("kill %d: %d events predicted so far", i+1, len(b.predicted()))
	}
	b.finishWith(ids)

	pcfg := b.pipelineConfig()
	in, err := backtest.FromTopic(context.Background(), backtest.TopicRange{Brokers: []string{b.addr}, Topic: b.topic("events"), LabelsTopic: b.topic("labels"),
		From: backtest.Unbounded, To: backtest.Unbounded})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	want := map[string]string{}
	collect := func(_ int, outs []pipeline.Output) error {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range outs {
			if o.Kind == pipeline.OutPrediction {
				var p struct{ ID string }
				json.Unmarshal(o.Value, &p)
				want[p.ID] = string(o.Value)
			}
		}
		return nil
	}
	if _, err := backtest.Replay(context.Background(), backtest.ReplayConfig{Name: "reference", Pipeline: pcfg, Outputs: collect}, in); err != nil {
		t.Fatal(err)
	}
	differing, dups, got := 0, 0, map[string]bool{}
	for _, msgs := range readTopic(t, b.addr, b.topic("predictions")) {
		for _, m := range msgs {
			var p struct{ ID string }
			json.Unmarshal(m.Value, &p)
			if got[p.ID] {
				dups++
			}
			got[p.ID] = true
			if want[p.ID] != string(m.Value) {
				if differing++; differing <= 5 {
					t.Logf("partition %d offset %d: got %s, the backtest %s", m.Partition, m.Offset, m.Value, want[p.ID])
				}
			}
		}
	}
	t.Logf("%d events: %d predicted, %d predictions differ from the backtest's, %d duplicates", len(ids), len(got), differing, dups)
	if dups == 0 {
		t.Fatal("no duplicate prediction: no kill landed while the consumers processed, the test proves nothing")
	}
	if differing != 0 || len(got) != len(ids) || len(want) != len(ids) {
		t.Fatalf("%d of %d predictions differ from a backtest of the two topics; %d of %d events predicted (the backtest %d)", differing, len(got)+dups, len(got), len(ids), len(want))
	}
}
