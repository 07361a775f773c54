package backtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// A topic range whose first records retention deletes after the range was
// resolved is an error naming the offsets lost, not a backtest that silently
// starts later.
func TestTopicRangeRefusesDeletedRecords(t *testing.T) {
	c := kafkatest.Cluster(t, kfake.SeedTopics(1, "events"))
	addr := c.ListenAddrs()[0]
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", BatchTimeout: time.Millisecond, BatchSize: 1000, RequiredAcks: kafka.RequireAll}
	msgs := make([]kafka.Message, 100)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte("k"), Value: fmt.Appendf(nil, `{"id":"e%d","x":[1,0.5,-1],"label":1}`, i)}
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	in, err := FromTopic(context.Background(), TopicRange{Brokers: []string{addr}, Topic: "events", From: Unbounded, To: Unbounded})
	if err != nil {
		t.Fatal(err)
	}

	kafkatest.DeleteRecords(t, addr, "events", 0, 50)

	col := &collector{preds: map[string][]byte{}}
	_, err = Replay(context.Background(), ReplayConfig{Name: "deleted", Pipeline: pipelineConfig(t, "perceptron", ""), Outputs: col.outputs}, in)
	if err == nil || !strings.Contains(err.Error(), "offsets 0 to 49 of the range were deleted") {
		t.Fatalf("err = %v, want the deleted offsets named", err)
	}
	if len(col.preds) != 0 {
		t.Fatalf("%d predictions from a range missing its start", len(col.preds))
	}
}

// Outcomes of different partitions with the same event time are merged in
// partition order: a topic backtest's curve is the same at every run (in
// Go's map order it was not).
func TestTopicBacktestCurveIsTheSameEveryRun(t *testing.T) {
	c := kafkatest.Cluster(t, kfake.SeedTopics(3, "events"))
	addr := c.ListenAddrs()[0]
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	r := rand.New(rand.NewPCG(4, 4))
	var msgs []kafka.Message
	for i := range 900 {
		x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		y := 1 - 2*r.IntN(2) // noise: mistakes all along the curve
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%d", i%30),
			Value: fmt.Appendf(nil, `{"id":"e%d","ts":"2026-01-01T00:00:%02dZ","x":[%g,%g,%g,%g],"label":%d}`, i, i/100, x[0], x[1], x[2], x[3], y)})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var first []Point
	for run := range 8 {
		in, err := FromTopic(context.Background(), TopicRange{Brokers: []string{addr}, Topic: "events", From: Unbounded, To: Unbounded})
		if err != nil {
			t.Fatal(err)
		}
		if ps := in.Partitions(); !slices.Equal(ps, []int{0, 1, 2}) {
			t.Fatalf("run %d: partitions %v, want [0 1 2]", run, ps)
		}
		rep, err := Replay(context.Background(), ReplayConfig{Name: "ties", Pipeline: pipelineConfig(t, "perceptron", "")}, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.OverTime) < 10 {
			t.Fatalf("%d curve points", len(rep.OverTime))
		}
		if run == 0 {
			first = rep.OverTime
		} else if !slices.Equal(rep.OverTime, first) {
			t.Fatalf("run %d: the curve differs from the first run's", run)
		}
	}
}
