package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/keystore"
	"github.com/driftstream/driftstream/topics"
)

// BenchmarkKeyCache measures what a key store costs and saves: a worker of
// lasec-ss keys at d = 50 (about 11 KB of state each) processes events of
// 20,000 keys, checkpointing every 10,000 records, with every key in memory
// or with 10% or 1% of them, the others in a Pebble key store. Keys are
// drawn uniformly (the worst case: most events miss the cache) or by a Zipf
// law (s = 1.1: a few hot keys, as customers and devices usually are).
// It reports events/s, the heap held after the run (live objects after a
// collection; Pebble's block cache and memtables too when built without cgo,
// as the Dockerfile builds), Pebble's own count of those, and the store's
// bytes on disk.
//
//	CGO_ENABLED=0 go test -run '^$' -bench KeyCache -benchtime 1x ./pipeline
func BenchmarkKeyCache(b *testing.B) {
	const nkeys, events, dim = 20_000, 100_000, 50
	vec, _ := topics.NewVectorizer(dim, 0)
	cfg := Config{Settings: keyed.Settings{Learner: "lasec-ss", Params: []byte(`{"a":0.3}`), Seed: 1, Vector: vec}}
	for _, pattern := range []string{"uniform", "zipf"} {
		r := rand.New(rand.NewPCG(1, 2))
		zipf := rand.NewZipf(r, 1.1, 1, nkeys-1)
		recs := make([]Record, events)
		for i := range recs {
			k := i // every key once first
			if i >= nkeys {
				if pattern == "zipf" {
					k = int(zipf.Uint64())
				} else {
					k = r.IntN(nkeys)
				}
			}
			v := labeledEvent(r, i, dim, func() float64 { return float64(int(r.NormFloat64()*1e4)) / 1e4 })
			recs[i] = Record{Offset: int64(i), Key: fmt.Appendf(nil, "customer-%07d", k), Value: v}
		}
		for _, cache := range []int{0, nkeys / 10, nkeys / 100} {
			name := "all-in-memory"
			if cache > 0 {
				name = fmt.Sprintf("cache-%d", cache)
			}
			b.Run(pattern+"/"+name, func(b *testing.B) {
				for range b.N {
					before := liveHeap()
					w, err := NewWorker(cfg, 0)
					if err != nil {
						b.Fatal(err)
					}
					dir := filepath.Join(b.TempDir(), "keys")
					var ks *keystore.Store
					if cache > 0 {
						ks, err = keystore.Open(dir, keystore.Options{})
						if err != nil {
							b.Fatal(err)
						}
						if err := w.UseKeyStore(ks, cache); err != nil {
							b.Fatal(err)
						}
					}
					start := time.Now()
					for i, rec := range recs {
						if err := w.Process(context.Background(), rec); err != nil {
							b.Fatal(err)
						}
						if i%10_000 == 9_999 {
							w.TakeOutputs()
							if _, err := w.TakeCheckpoint(); err != nil {
								b.Fatal(err)
							}
						}
					}
					took := time.Since(start)
					b.ReportMetric(float64(events)/took.Seconds(), "events/s")
					b.ReportMetric(float64(liveHeap()-before)/1e6, "heap-MB")
					b.ReportMetric(float64(w.Resident()), "keys-in-memory")
					b.ReportMetric(float64(dirBytes(dir))/1e6, "disk-MB")
					if ks != nil {
						b.ReportMetric(float64(ks.MemoryBytes())/1e6, "pebble-MB")
					}
					if w.Keys() != nkeys {
						b.Fatalf("%d keys, want %d", w.Keys(), nkeys)
					}
					runtime.KeepAlive(w)
					w.Close()
				}
			})
		}
	}
}

// dirBytes is the size of the files under dir (0 when it does not exist).
func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
