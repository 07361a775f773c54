package backtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
)

// The producer's stamps (MessageOptions.Clock) make the service's merge of
// an events topic and a labels topic by timestamp (pipeline.Merge: the
// smaller first, a tie to the events, each topic in its log's order) give
// back, partition by partition, the order Messages emitted: with labels
// one event late and fifty, unlabeled events among them (no label ever),
// label records of the source passed through (delay 0 with unlabeled
// events: the source labels them five events on), one key and many, and the
// two topics handed to the merge in batches of any size. Events with no
// label record between them share a millisecond, so the clock moves on
// only as far as it must.
func TestStampsMergeBackInOrder(t *testing.T) {
	for _, c := range []struct {
		delay, keys, unlabeledEvery, batch int
	}{{1, 1, 0, 7}, {50, 40, 0, 64}, {7, 40, 3, 1}, {0, 5, 2, 16}, {0, 1, 3, 5}, {3, 9, 4, 1000}} {
		t.Run(fmt.Sprintf("delay=%d/keys=%d/unlabeled=%d/batch=%d", c.delay, c.keys, c.unlabeledEvery, c.batch), func(t *testing.T) {
			var exs []streams.Example
			for i := range 600 {
				x, _ := learners.NewDense([]float64{float64(i), 1})
				ex := streams.Example{ID: fmt.Sprintf("e%d", i), Key: fmt.Sprintf("k%d", (i*7)%c.keys), X: x, Label: 1 - 2*(i%2)}
				if c.unlabeledEvery > 0 && i%c.unlabeledEvery == 0 {
					ex.Label = 0
				}
				exs = append(exs, ex)
				if c.delay == 0 && c.unlabeledEvery > 0 && i >= 5 && (i-5)%c.unlabeledEvery == 0 { // the source's own label record, five events on
					exs = append(exs, streams.Example{ID: fmt.Sprintf("e%d", i-5), Key: fmt.Sprintf("k%d", ((i-5)*7)%c.keys), LabelRecord: true, Label: 1})
				}
			}
			base := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
			const parts = 3
			balancer, _ := topics.Balancer(topics.DefaultPartitioner)
			type rec struct {
				labels bool
				seq    int
				at     time.Time
			}
			emitted := make([][]rec, parts)
			logs := make([][2][]pipeline.Fetched, parts)
			seq, labelRecords, moves := 0, 0, 0 // moves: events that follow a label record
			var last time.Time
			prevLabel := false
			if _, err := Messages(context.Background(), streams.FromExamples(2, exs), MessageOptions{Keys: c.keys, LabelsDelay: c.delay, Clock: base}, func(m Message) error {
				if m.Time.Before(last) {
					t.Fatalf("message %d stamped %s, before the one before it (%s)", seq, m.Time, last)
				}
				last = m.Time
				p := balancer.Balance(kafka.Message{Key: m.Key}, 0, 1, 2)
				topic := pipeline.EventsTopic
				if m.Labels {
					topic = pipeline.LabelsTopic
					labelRecords++
				} else if prevLabel {
					moves++
				}
				prevLabel = m.Labels
				emitted[p] = append(emitted[p], rec{m.Labels, seq, m.Time})
				off := int64(len(logs[p][topic]))
				logs[p][topic] = append(logs[p][topic], pipeline.Fetched{Record: pipeline.Record{Topic: topic, Partition: p, Offset: off, Time: m.Time, Key: []byte(fmt.Sprint(seq))}})
				seq++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if labelRecords == 0 {
				t.Fatal("no label record: the case proves nothing")
			}
			for p := range parts {
				var in [2]chan []pipeline.Fetched
				for topic := range in {
					log := logs[p][topic]
					in[topic] = make(chan []pipeline.Fetched, len(log)/c.batch+1)
					for i := 0; i < len(log); i += c.batch {
						in[topic] <- log[i:min(i+c.batch, len(log))]
					}
					close(in[topic])
				}
				out := make(chan []pipeline.Fetched, 1)
				go pipeline.Merge(context.Background(), []<-chan []pipeline.Fetched{in[0], in[1]}, []int64{0, 0}, -1, 50, out, nil)
				i := 0
				for batch := range out {
					for _, f := range batch {
						if want := fmt.Sprint(emitted[p][i].seq); string(f.Key) != want {
							t.Fatalf("partition %d: merged record %d is message %s, emitted %s", p, i, f.Key, want)
						}
						i++
					}
				}
				if i != len(emitted[p]) {
					t.Fatalf("partition %d: %d merged of %d", p, i, len(emitted[p]))
				}
			}
			// The clock moves 1 ms per run of label records, not per event.
			if span := last.Sub(base); span != time.Duration(moves)*time.Millisecond {
				t.Fatalf("the clock moved %s over %d messages, %d of them events after label records", span, seq, moves)
			}
		})
	}
}
