package pipeline

import (
	"context"
	"testing"

	"github.com/driftstream/driftstream/config"
	"github.com/driftstream/driftstream/internal/benchdata"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/topics"
)

// BenchmarkShippedCPU is the CPU per record of one partition of the
// shipped configuration (logreg, the additive population model, the
// intercept, the default detector; every other setting its default, as
// the service's), checkpointed as the service's partitions are (every
// 10,000 records, DRIFTSTREAM_CHECKPOINT_EVERY, waiting up to 100,000,
// DRIFTSTREAM_CHECKPOINT_MAX_EVERY's default, while a checkpoint would
// write more than a key record per 4 records; no period), over 250 keys and 250,000 events of d =
// 10: a stream drawn as the real-broker benchmark's (service's
// BenchmarkRealKafkaCPU/shipped-d10, benchdata.Stream) at the size of one
// of its four partitions, without the broker, the reading and the
// writing. "inline": every event carries
// its label; "late": half do, a quarter get theirs in a label record 30 to
// 80 events later, a quarter never (DRIFTSTREAM_BENCH_LATE's mix);
// "late-25-keys": the late mix over 25 keys, 10,000 events a key, where
// keys reach the cap of awaited events; "inline-25000-keys" and
// "inline-250000-keys": one partition's share of the real-broker
// benchmark at 100,000 and 1,000,000 keys (DRIFTSTREAM_BENCH_KEYS), 10
// events a key and one; "inline-250000-keys-10-each": the 1,000,000 keys'
// share with 10 events a key (2,500,000 events). Each iteration is a fresh
// worker through every record.
//
//	go test -run '^$' -bench ShippedCPU -benchtime 3x ./pipeline
func BenchmarkShippedCPU(b *testing.B) {
	const d, every, maxEvery = 10, 10_000, 10 * 10_000 // the service's defaults (service.CheckpointMaxFactor)
	for _, c := range []struct {
		name         string
		keys, events int
		late         bool
	}{{"inline", 250, 250_000, false}, {"late", 250, 250_000, true}, {"late-25-keys", 25, 250_000, true}, {"inline-25000-keys", 25_000, 250_000, false}, {"inline-250000-keys", 250_000, 250_000, false}, {"inline-250000-keys-10-each", 250_000, 2_500_000, false}} {
		keys, late, events := c.keys, c.late, c.events
		b.Run(c.name, func(b *testing.B) {
			recs := shippedRecords(d, keys, events, late)
			cfg := shippedConfig(d)
			var bytes int
			b.ReportAllocs()
			for b.Loop() {
				w, err := NewWorker(cfg, 0)
				if err != nil {
					b.Fatal(err)
				}
				bytes = 0
				since := 0
				for i, r := range recs {
					if err := w.Process(context.Background(), r); err != nil {
						b.Fatal(err)
					}
					if (i+1)%1024 == 0 {
						w.TakeOutputs()
					}
					if since++; w.checkpointDue(since, every, maxEvery) {
						since = 0
						c, err := w.TakeCheckpoint()
						if err != nil {
							b.Fatal(err)
						}
						bytes += c.Bytes
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
			b.ReportMetric(float64(bytes)/float64(len(recs)), "changelog-bytes/record")
		})
	}
}

// shippedConfig is the shipped configuration at dimension d: logreg, the
// additive population model, the intercept, the default detector; every
// other setting its default, as the service's.
func shippedConfig(d int) Config {
	vec, _ := topics.NewVectorizer(d, 0) // d ≥ 1 and no hashing: no error
	return Config{Settings: keyed.Settings{Learner: "logreg", Seed: 1, Vector: vec.WithBias(), QueryScale: 1,
		Population: keyed.PopulationAdditive, Detectors: config.DefaultDetectors()}}
}

// shippedRecords are the events of the real-broker benchmark's stream
// (benchdata.Stream) over keys keys, at offsets 0 on.
func shippedRecords(d, keys, n int, late bool) []Record {
	var recs []Record
	benchdata.Stream(n, d, keys, late, func(key, value []byte) {
		recs = append(recs, Record{Offset: int64(len(recs)), Key: key, Value: value})
	})
	return recs
}
