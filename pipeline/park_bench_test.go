package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/keystore"
	"github.com/driftstream/driftstream/topics"
)

// restoredTook records how long a Runner took to get its state, and how.
type restoredTook struct {
	took time.Duration
	res  Restored
}

func (o *restoredTook) Restored(res Restored, _ KeyCount, took time.Duration) {
	o.took, o.res = took, res
}

// BenchmarkParkedRestart compares the two ways a restarted process gets a
// partition of perceptron d=10 keys back, each with a key store holding a
// tenth of the keys in memory: a full restore from the changelog (here the
// in-memory store, the faster source: see BenchmarkRestore in ./service for
// the in-process broker), and resuming the key store that the former
// process parked (keystore.Reopen, Unpark, then the Runner's claim). It
// also reports how long Park takes at shutdown, which writes the keys held
// in memory to the store and flushes it, and how long resuming takes when
// another owner rewrote DRIFTSTREAM_BENCH_REWRITE percent of the keys in
// between (default 1; a rolling update): the parked store catches up from
// the changelog's tail, against a full restore of the same changelog
// (s/restore-now). Medians of b.N rounds; the key count is
// DRIFTSTREAM_BENCH_KEYS (default 100,000).
//
//	DRIFTSTREAM_BENCH_KEYS=1000000 CGO_ENABLED=0 go test -run '^$' -bench ParkedRestart -benchtime 3x ./pipeline
func BenchmarkParkedRestart(b *testing.B) {
	nkeys := 100_000
	if n, err := strconv.Atoi(os.Getenv("DRIFTSTREAM_BENCH_KEYS")); err == nil && n > 0 {
		nkeys = n
	}
	rewrite := 1
	if n, err := strconv.Atoi(os.Getenv("DRIFTSTREAM_BENCH_REWRITE")); err == nil && n > 0 && n <= 100 {
		rewrite = n
	}
	ctx := context.Background()
	vec, _ := topics.NewVectorizer(10, 0)
	cfg := Config{Settings: keyed.Settings{Learner: "perceptron", Seed: 1, Vector: vec}}
	store := checkpoint.NewMemoryStore()
	w, err := NewWorker(cfg, 0)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range nkeys {
		if err := w.Process(ctx, Record{Offset: int64(i), Key: fmt.Appendf(nil, "customer-%07d", i),
			Value: labeledEvent(r, i, 10, func() float64 { return float64(int(r.NormFloat64()*1e4)) / 1e4 })}); err != nil {
			b.Fatal(err)
		}
		w.TakeOutputs()
	}
	if _, _, err := w.Checkpoint(ctx, store); err != nil {
		b.Fatal(err)
	}
	w = nil
	base := store.Log(0) // every round starts from this changelog: the rounds' claims and rewrites are dropped
	cache := max(1, nkeys/10)
	opt := keystore.Options{}
	run := func(gen int32, ks KeyStore, kept *Kept) (*Runner, *restoredTook) {
		obs := &restoredTook{}
		rc := RunnerConfig{Partition: 0, Pipeline: cfg, Store: store, Open: (&feed{bounded: true}).opener(newGate(1 << 62)), Sink: &testSink{out: newOutputs()},
			Generation: gen, CheckpointEvery: 1 << 30, CheckpointPeriod: time.Hour, FinalTimeout: time.Minute, Hooks: []Hook{obs}, Kept: kept, KeyStore: ks, CacheKeys: cache}
		rn, err := NewRunner(rc)
		if err != nil {
			b.Fatal(err)
		}
		if err := rn.Run(ctx); err != nil {
			b.Fatal(err)
		}
		return rn, obs
	}
	var restore, park, resume, catchUp, restoreNow []float64
	for i := range b.N {
		store.SetLog(0, base)
		dir := b.TempDir()
		ks, err := keystore.Open(filepath.Join(dir, "keys"), opt)
		if err != nil {
			b.Fatal(err)
		}
		first, obs := run(int32(5*i+1), ks, nil)
		if obs.res.Origin.Resumed() || first.Kept() == nil || first.Kept().Keys() != nkeys {
			b.Fatalf("first runner: resumed %v, kept %v", obs.res.Origin.Resumed(), first.Kept())
		}
		restore = append(restore, obs.took.Seconds())

		start := time.Now()
		if err := first.Kept().Park(filepath.Join(dir, "parked"), "bench"); err != nil {
			b.Fatal(err)
		}
		park = append(park, time.Since(start).Seconds())

		start = time.Now()
		s, manifest, err := keystore.Reopen(filepath.Join(dir, "parked"), opt)
		if err != nil {
			b.Fatal(err)
		}
		kept, err := Unpark(cfg, 0, s, cache, manifest, "bench")
		if err != nil {
			b.Fatal(err)
		}
		unparking := time.Since(start)
		second, obs := run(int32(5*i+2), nil, kept)
		if obs.res.Origin != FromParked || second.w.Keys() != nkeys {
			b.Fatalf("second runner: unparked %v, %d keys", obs.res.Origin == FromParked, second.w.Keys())
		}
		resume = append(resume, (unparking + obs.took).Seconds())

		// Parked again; another owner rewrites 1% of the keys; the parked
		// store catches up from what it wrote.
		if err := second.Kept().Park(filepath.Join(dir, "parked"), "bench"); err != nil {
			b.Fatal(err)
		}
		tail := rewriteKeys(b, store, second.Kept(), max(1, nkeys*rewrite/100), int32(5*i+3))
		start = time.Now()
		s, manifest, err = keystore.Reopen(filepath.Join(dir, "parked"), opt)
		if err != nil {
			b.Fatal(err)
		}
		if kept, err = Unpark(cfg, 0, s, cache, manifest, "bench"); err != nil {
			b.Fatal(err)
		}
		unparking = time.Since(start)
		third, obs := run(int32(5*i+4), nil, kept)
		if obs.res.Origin != FromParked || obs.res.CaughtUp != tail || third.w.Keys() != nkeys {
			b.Fatalf("third runner: unparked %v, caught up %d positions (want %d), %d keys", obs.res.Origin == FromParked, obs.res.CaughtUp, tail, third.w.Keys())
		}
		catchUp = append(catchUp, (unparking + obs.took).Seconds())
		third.Kept().Close()

		ks, err = keystore.Open(filepath.Join(dir, "fresh"), opt)
		if err != nil {
			b.Fatal(err)
		}
		fourth, obs := run(int32(5*i+5), ks, nil)
		if obs.res.Origin.Resumed() || fourth.w.Keys() != nkeys {
			b.Fatalf("fourth runner: resumed %v, %d keys", obs.res.Origin.Resumed(), fourth.w.Keys())
		}
		restoreNow = append(restoreNow, obs.took.Seconds())
		fourth.Kept().Close()
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(med(restore), "s/restore")
	b.ReportMetric(med(park), "s/park")
	b.ReportMetric(med(resume), "s/unpark")
	b.ReportMetric(med(catchUp), "s/unpark-catch-up")
	b.ReportMetric(med(restoreNow), "s/restore-now")
}

// rewriteKeys writes, as another owner of generation gen would after
// claiming the partition from k, a checkpoint of n of k's keys (their
// records rewritten under its epoch), and returns the positions it wrote.
func rewriteKeys(b *testing.B, store *checkpoint.MemoryStore, k *Kept, n int, gen int32) int64 {
	b.Helper()
	ctx := context.Background()
	before := len(store.Log(0))
	epoch := checkpoint.NextEpoch(k.epoch, gen)
	if err := store.Claim(ctx, checkpoint.Ownership{Partition: 0, Epoch: epoch, Owner: "other"}); err != nil {
		b.Fatal(err)
	}
	var recs []checkpoint.KeyRecord
	for _, e := range store.Log(0) {
		if len(recs) == n {
			break
		}
		rec, err := checkpoint.Decode(e.Value)
		if err != nil {
			b.Fatal(err)
		}
		if rec.Key != nil {
			rec.Key.Epoch = epoch
			recs = append(recs, *rec.Key)
		}
	}
	if err := store.Write(ctx, recs, checkpoint.Marker{Partition: 0, Epoch: epoch, Through: k.w.through}); err != nil {
		b.Fatal(err)
	}
	return int64(len(store.Log(0)) - before)
}
