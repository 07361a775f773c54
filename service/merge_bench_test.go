package service

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/driftstream/driftstream/internal/benchdata"
)

// BenchmarkLabelsTopic compares the service reading labels on a topic of
// their own (each label 30–80 of its key's events after the event, merged
// by timestamp: pipeline.Merge) with the same label records on the events
// topic, in the same order (the same records, one topic), alternating the
// two benchRounds times; the goal is a ratio ≥ 0.9. Rates are
// events per second, from the first tenth of them on, to the last label
// processed.
//
//	go test -run '^$' -bench LabelsTopic -benchtime 1x ./service
func BenchmarkLabelsTopic(b *testing.B) {
	n := benchEvents()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "inline", "split", "labels"),
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(4 << 20)}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	writeLabelsBench(b, addr, n, 10)
	var inline, split, ratio []float64
	for i := range benchRounds() {
		ri := labelsBenchRun(b, addr, fmt.Sprintf("inline-%d", i), "inline", "", n)
		rs := labelsBenchRun(b, addr, fmt.Sprintf("split-%d", i), "split", "labels", n)
		inline, split, ratio = append(inline, ri), append(split, rs), append(ratio, rs/ri)
	}
	b.ReportMetric(median(inline), "inline-events/s")
	b.ReportMetric(median(split), "labels-topic-events/s")
	b.ReportMetric(median(ratio), "ratio")
	b.ReportMetric(slices.Min(ratio), "min-ratio")
}

// writeLabelsBench writes n unlabeled events of dimension dim over 1,000
// keys and their labels 30–80 events later in time twice: on "split" and
// "labels", and both on "inline" in the order of their timestamps.
func writeLabelsBench(b *testing.B, addr string, n, dim int) {
	b.Helper()
	r := rand.New(rand.NewPCG(2, 2))
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var split, labels []kafka.Message
	for i := range n {
		xs, y := benchdata.Point(r, dim)
		key := fmt.Appendf(nil, "k%d", r.IntN(1000))
		at := base.Add(time.Duration(i) * time.Millisecond)
		split = append(split, kafka.Message{Key: key, Time: at, Value: fmt.Appendf(nil, `{"id":"e%d","x":%s}`, i, xs)})
		labels = append(labels, kafka.Message{Key: key, Time: at.Add(time.Duration(30+r.IntN(51)) * time.Millisecond), Value: fmt.Appendf(nil, `{"id":"e%d","label":%d}`, i, y)})
	}
	// The labels topic in time order, as a labelling system writes it.
	for i := 1; i < len(labels); i++ {
		for j := i; j > 0 && labels[j].Time.Before(labels[j-1].Time); j-- {
			labels[j], labels[j-1] = labels[j-1], labels[j]
		}
	}
	inline := make([]kafka.Message, 0, 2*n)
	for i, j := 0, 0; i < len(split) || j < len(labels); {
		if j == len(labels) || i < len(split) && !labels[j].Time.Before(split[i].Time) {
			inline, i = append(inline, split[i]), i+1
		} else {
			inline, j = append(inline, labels[j]), j+1
		}
	}
	for topic, msgs := range map[string][]kafka.Message{"inline": inline, "split": split, "labels": labels} {
		w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, BatchSize: 5000, RequiredAcks: kafka.RequireAll}
		for len(msgs) > 0 {
			k := min(len(msgs), 5000)
			if err := w.WriteMessages(context.Background(), msgs[:k]...); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[k:]
		}
		w.Close()
	}
}

// labelsBenchRun runs the service over events (and labels, when set) until
// it has processed the n events and their n labels, and returns its rate.
func labelsBenchRun(b *testing.B, addr, run, events, labels string, n int) float64 {
	b.Helper()
	cfg, err := benchConfig(addr, run, "perceptron", 10)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Topics.Events, cfg.Topics.Labels = events, labels
	stop, rate, _ := timeService(b, cfg, n, func(t Totals) bool { return t.Events >= int64(n) && t.Labeled >= int64(n)-int64(n)/100 })
	stop()
	return rate
}
