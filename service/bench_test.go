package service

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// benchEvents is the size of the throughput comparison
// (DRIFTSTREAM_BENCH_EVENTS overrides it).
func benchEvents() int {
	if n, err := strconv.Atoi(os.Getenv("DRIFTSTREAM_BENCH_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// benchCluster is a broker holding n labeled events of dimension dim over
// 1,000 keys on 4 partitions.
func benchCluster(b *testing.B, n, dim int) string {
	b.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "events", "pass-through"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", Balancer: &kafka.Hash{}, BatchTimeout: time.Millisecond, BatchSize: 5000,
		RequiredAcks: kafka.RequireAll}
	defer w.Close()
	r := rand.New(rand.NewPCG(1, 1))
	var msgs []kafka.Message
	for i := 0; i < n; i++ {
		x := make([]float64, dim)
		m := 0.0
		for d := range x {
			x[d] = float64(int(r.NormFloat64()*1e4)) / 1e4
			m += float64(d%3-1) * x[d]
		}
		y := 1
		if m < 0 {
			y = -1
		}
		xs, _ := json.Marshal(x)
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%d", r.IntN(1000)), Value: fmt.Appendf(nil, `{"id":"e%d","x":%s,"label":%d}`, i, xs, y)})
		if len(msgs) == 5000 || i == n-1 {
			if err := w.WriteMessages(context.Background(), msgs...); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
	return addr
}

// passThrough is the baseline: kafka-go alone, reading every partition of
// the events topic and writing one small record per event to another topic,
// flushed every 1,000 records as the service checkpoints.
func passThrough(b *testing.B, addr string, n int) {
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: "events", Partition: p, MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 50 * time.Millisecond})
			defer r.Close()
			w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "pass-through", Balancer: &kafka.Hash{}, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
			defer w.Close()
			conn, _ := kafka.DialLeader(context.Background(), "tcp", addr, "events", p)
			_, end, _ := conn.ReadOffsets()
			conn.Close()
			var out []kafka.Message
			for done := int64(0); done < end; done++ {
				m, err := r.FetchMessage(context.Background())
				if err != nil {
					b.Error(err)
					return
				}
				out = append(out, kafka.Message{Key: m.Key, Value: []byte(`{"id":"x","label":1}`)})
				if len(out) == 1000 || done == end-1 {
					if err := w.WriteMessages(context.Background(), out...); err != nil {
						b.Error(err)
						return
					}
					out = out[:0]
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkThroughput compares the service with the kafka-go pass-through
// on the same broker in the same run; the goal is a ratio ≥ 0.8.
//
//	go test -run '^$' -bench Throughput -benchtime 1x ./service
func BenchmarkThroughput(b *testing.B) {
	n := benchEvents()
	for _, tc := range []struct {
		learner string
		dim     int
	}{{"perceptron", 10}, {"lasec-ss", 10}, {"perceptron", 50}, {"lasec-ss", 50}} {
		b.Run(fmt.Sprintf("%s-d%d", tc.learner, tc.dim), func(b *testing.B) {
			addr := benchCluster(b, n, tc.dim)
			start := time.Now()
			passThrough(b, addr, n)
			base := float64(n) / time.Since(start).Seconds()
			vec, _ := topics.NewVectorizer(tc.dim, 0)
			cfg := Config{Brokers: []string{addr}, Group: "bench", Partitions: 4, Replication: 1,
				Topics:   Topics{Events: "events", Predictions: "predictions", Queries: "label-queries", DeadLetters: "dead-letters", Changelog: "changelog"},
				Pipeline: pipeline.Config{Learner: tc.learner, Seed: 1, Vector: vec, QueryScale: 1}, CheckpointEvery: 1000, CheckpointInterval: 5 * time.Second,
				FlushInterval: 20 * time.Millisecond}
			s, err := New(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			// Timed from the first tenth of the events on: joining the consumer
			// group, and a stall of seconds seen in some runs right after the
			// first few thousand events, are not throughput.
			for s.Totals().Events < int64(n/10) {
				time.Sleep(time.Millisecond)
			}
			start, first := time.Now(), s.Totals().Events
			for s.Totals().Events < int64(n) {
				time.Sleep(time.Millisecond)
			}
			rate := float64(int64(n)-first) / time.Since(start).Seconds()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(base, "passthrough-events/s")
			b.ReportMetric(rate, "service-events/s")
			b.ReportMetric(rate/base, "ratio")
		})
	}
}
