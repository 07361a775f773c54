package backtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The speed comparison's history: by default scaled down from 1M events
// over 10k keys so that a run takes seconds (the ratio of the two rates is
// what matters); DRIFTSTREAM_BENCH_EVENTS and DRIFTSTREAM_BENCH_KEYS set it.
const benchDim, benchParts = 10, 4

var benchEvents, benchKeys = envInt("DRIFTSTREAM_BENCH_EVENTS", 200_000), envInt("DRIFTSTREAM_BENCH_KEYS", 2_000)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func benchExamples() []streams.Example {
	r := rand.New(rand.NewPCG(1, 2))
	exs := make([]streams.Example, benchEvents)
	for i := range exs {
		x := make([]float64, benchDim)
		m := 0.0
		for d := range x {
			x[d] = r.NormFloat64()
			m += float64(d%3-1) * x[d]
		}
		y := 1
		if m < 0 {
			y = -1
		}
		v, _ := learners.NewDense(x)
		exs[i] = streams.Example{ID: fmt.Sprint(i), Key: fmt.Sprintf("k%d", r.IntN(benchKeys)), X: v, Label: y}
	}
	return exs
}

func benchConfig(b *testing.B) ReplayConfig {
	vec, err := topics.NewVectorizer(benchDim, 0)
	if err != nil {
		b.Fatal(err)
	}
	return ReplayConfig{Name: "bench", Pipeline: pipeline.Config{Settings: keyed.Settings{Learner: "perceptron", Seed: 1, Vector: vec, QueryScale: 1}}}
}

// BenchmarkReplay compares the two ways to backtest the same history: from
// the source itself (a file's examples in memory) and from the topic the
// producer wrote it to (the in-process broker, over TCP). The goal
// is a topic rate ≥ 0.8 × the file rate: compare the records/s metrics.
//
//	go test -run '^$' -bench Replay -benchtime 3x ./backtest
func BenchmarkReplay(b *testing.B) {
	exs := benchExamples()
	b.Run("file", func(b *testing.B) {
		cfg := benchConfig(b)
		for b.Loop() {
			in, err := FromSource(streams.FromExamples(benchDim, exs), MessageOptions{Keys: 1}, benchParts, false)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Replay(context.Background(), cfg, in); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("topic", func(b *testing.B) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(benchParts, "events"))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		addr := c.ListenAddrs()[0]
		produceHistory(b, addr, streams.FromExamples(benchDim, exs), MessageOptions{Keys: 1})
		cfg := benchConfig(b)
		for b.Loop() {
			in, err := FromTopic(context.Background(), TopicRange{Brokers: []string{addr}, Topic: "events", From: Unbounded, To: Unbounded})
			if err != nil {
				b.Fatal(err)
			}
			rep, err := Replay(context.Background(), cfg, in)
			if err != nil {
				b.Fatal(err)
			}
			if rep.Totals.Events != int64(benchEvents) {
				b.Fatalf("%d events", rep.Totals.Events)
			}
		}
		b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}
