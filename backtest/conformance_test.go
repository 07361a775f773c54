package backtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/pipeline/sourcetest"
	"github.com/driftstream/driftstream/streams"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// conformanceHistory is n labeled events on one partition, their labels
// delayed onto a labels topic, as the producer writes them: the examples
// and the records, per input topic in offset order.
func conformanceHistory(t *testing.T, n int) ([]streams.Example, MessageOptions, [2][]pipeline.Record) {
	t.Helper()
	exs := make([]streams.Example, n)
	for i := range exs {
		x, _ := learners.NewDense([]float64{float64(i % 13), 1})
		exs[i] = streams.Example{ID: fmt.Sprintf("e%d", i), Key: fmt.Sprintf("k%d", i%7), X: x, Label: 1 - 2*(i%2)}
	}
	opts := MessageOptions{Keys: 1, LabelsDelay: 5}
	var written [2][]pipeline.Record
	if _, err := Messages(context.Background(), streams.FromExamples(2, exs), opts, func(m Message) error {
		i := pipeline.EventsTopic
		if m.Labels {
			i = pipeline.LabelsTopic
		}
		written[i] = append(written[i], pipeline.Record{Topic: i, Offset: int64(len(written[i])), Key: m.Key, Value: m.Value})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return exs, opts, written
}

// The backtests' inputs pass the Source conformance suite: a history held
// in memory and a topic range of a broker.
func TestSourceConformance(t *testing.T) {
	ctx := context.Background()
	t.Run("memory", func(t *testing.T) {
		sourcetest.Run(t, sourcetest.Subject{Bounded: true, Labels: true,
			New: func(t *testing.T, n int) ([2][]pipeline.Record, func([2]int64) pipeline.Source) {
				exs, opts, written := conformanceHistory(t, n)
				return written, opener(t, func() (Input, error) { return FromExamples(2, exs, opts, 1, true) })
			}})
	})
	t.Run("topic range", func(t *testing.T) {
		sourcetest.Run(t, sourcetest.Subject{Bounded: true, Labels: true, Merged: true,
			New: func(t *testing.T, n int) ([2][]pipeline.Record, func([2]int64) pipeline.Source) {
				_, _, written := conformanceHistory(t, n)
				addr := kafkatest.Cluster(t, kfake.SeedTopics(1, "events", "labels")).ListenAddrs()[0]
				for i, topic := range []string{"events", "labels"} {
					w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
					var msgs []kafka.Message
					for o, r := range written[i] {
						// Interleaved in time: the events every 2 ms, the labels 1 ms after their place.
						at := time.UnixMilli(1_700_000_000_000 + int64(o*2*(1+4*i)+i))
						msgs = append(msgs, kafka.Message{Key: r.Key, Value: r.Value, Time: at})
					}
					if err := w.WriteMessages(ctx, msgs...); err != nil {
						t.Fatal(err)
					}
					w.Close()
				}
				return written, opener(t, func() (Input, error) {
					return FromTopic(ctx, TopicRange{Brokers: []string{addr}, Topic: "events", LabelsTopic: "labels", From: Unbounded, To: Unbounded})
				})
			}})
	})
}

// opener opens partition 0 of a new input at the offsets asked.
func opener(t *testing.T, input func() (Input, error)) func([2]int64) pipeline.Source {
	return func(from [2]int64) pipeline.Source {
		in, err := input()
		if err != nil {
			t.Fatal(err)
		}
		src, err := in.Open(context.Background(), 0, pipeline.From{Topics: from})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
}
