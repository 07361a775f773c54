package service

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/pipeline/sourcetest"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The service's partition readers pass the Source conformance suite: they
// follow the events and labels topics from the offsets given, and stop on
// Close with records unread.
func TestSourceConformance(t *testing.T) {
	sourcetest.Run(t, sourcetest.Subject{Labels: true, Merged: true,
		New: func(t *testing.T, n int) ([2][]pipeline.Record, func([2]int64) pipeline.Source) {
			addr := kafkatest.Cluster(t, kfake.SeedTopics(1, "events", "labels")).ListenAddrs()[0]
			var written [2][]pipeline.Record
			for i, topic := range []string{"events", "labels"} {
				w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
				var msgs []kafka.Message
				for o := range n / (1 + 4*i) { // labels: a fifth as many
					r := pipeline.Record{Topic: i, Offset: int64(o), Key: fmt.Appendf(nil, "k%d", o%7), Value: fmt.Appendf(nil, `{"id":"e%d","label":1}`, o)}
					written[i] = append(written[i], r)
					// Interleaved in time: the events every 2 ms, the labels every 10 ms, 1 ms apart.
					at := time.UnixMilli(1_700_000_000_000 + int64(o*(1+4*i)*2+i))
					msgs = append(msgs, kafka.Message{Key: r.Key, Value: r.Value, Time: at})
				}
				if err := w.WriteMessages(context.Background(), msgs...); err != nil {
					t.Fatal(err)
				}
				w.Close()
			}
			s := &Service{cfg: Config{Brokers: []string{addr}, Dialer: &kafka.Dialer{Timeout: 5 * time.Second},
				Topics: Topics{Events: "events", Labels: "labels"}, MergeWait: DefaultMergeWait}, log: slog.New(slog.DiscardHandler), fetchTransport: &kafka.Transport{}, count: newCounters()}
			return written, func(from [2]int64) pipeline.Source {
				src, err := s.openSource(context.Background(), 0, pipeline.From{Topics: from})
				if err != nil {
					t.Fatal(err)
				}
				return src
			}
		}})
}
