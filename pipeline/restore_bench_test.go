package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/config"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/topics"
)

// BenchmarkDecodeKeyState measures rebuilding one key from its checkpoint
// record, the per-key CPU of a restore (BenchmarkRestore in service times
// whole restores, broker included).
//
//	go test -run '^$' -bench DecodeKeyState -benchmem ./pipeline
func BenchmarkDecodeKeyState(b *testing.B) {
	for _, name := range []string{"perceptron", "lasec-ss"} {
		b.Run(name, func(b *testing.B) {
			w, err := NewWorker(testConfig(b, name, ""), 0)
			if err != nil {
				b.Fatal(err)
			}
			for i := range 20 {
				if err := w.Process(context.Background(), Record{Offset: int64(i), Key: []byte("customer-0000001"),
					Value: fmt.Appendf(nil, `{"id":"e%d","x":[0.5,-1.25,%d,0.125],"label":%d}`, i, i%3, 1-2*(i%2))}); err != nil {
					b.Fatal(err)
				}
			}
			state, err := w.keys["customer-0000001"].MarshalBinary()
			if err != nil {
				b.Fatal(err)
			}
			rec := checkpoint.KeyRecord{Key: "customer-0000001", AppliedThrough: [2]int64{19, checkpoint.NoOffset}, State: state}
			b.SetBytes(int64(len(state)))
			b.ReportAllocs()
			for range b.N {
				if _, err := w.model.Decode(&rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeKeyState measures encoding one key's state, which every
// checkpoint does for each key it writes.
//
//	go test -run '^$' -bench EncodeKeyState -benchmem ./pipeline
func BenchmarkEncodeKeyState(b *testing.B) {
	for _, name := range []string{"perceptron", "lasec-ss", "logreg+detector", "logreg+detector+pending"} {
		for _, dim := range []int{10, 50} {
			b.Run(fmt.Sprintf("%s-d%d", name, dim), func(b *testing.B) {
				vec, _ := topics.NewVectorizer(dim, 0)
				settings := keyed.Settings{Learner: name, Seed: 1, Vector: vec}
				if strings.HasPrefix(name, "logreg+detector") { // the shipped learner and drift detector
					settings.Learner, settings.Detectors = "logreg", config.DefaultDetectors()
				}
				w, err := NewWorker(Config{Settings: settings}, 0)
				if err != nil {
					b.Fatal(err)
				}
				r := rand.New(rand.NewPCG(1, 2))
				for i := range 20 {
					if err := w.Process(context.Background(), Record{Offset: int64(i), Key: []byte("customer-0000001"),
						Value: labeledEvent(r, i, dim, r.NormFloat64)}); err != nil {
						b.Fatal(err)
					}
				}
				if strings.HasSuffix(name, "+pending") { // 50 events awaiting their labels, as with late labels
					for i := 20; i < 70; i++ {
						v := labeledEvent(r, i, dim, r.NormFloat64)
						v = append(v[:bytes.LastIndex(v, []byte(`,"label"`))], '}')
						if err := w.Process(context.Background(), Record{Offset: int64(i), Key: []byte("customer-0000001"), Value: v}); err != nil {
							b.Fatal(err)
						}
					}
				}
				ks := w.keys["customer-0000001"]
				b.ReportAllocs()
				for b.Loop() {
					if _, err := ks.MarshalBinary(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkTakeCheckpoint measures a checkpoint of many changed keys, the
// cost that grows with the keys a checkpoint interval touches (issue 48):
// the shipped configuration (logreg, the additive population model, the
// intercept, the default drift detector) at d = 10, 10,000 keys with 5
// labeled events each, every key changed; ns/op is per checkpoint,
// ns/key per key record.
//
//	go test -run '^$' -bench TakeCheckpoint -benchmem ./pipeline
func BenchmarkTakeCheckpoint(b *testing.B) {
	const d, keys = 10, 10_000
	w, err := NewWorker(shippedConfig(d), 0)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 5 * keys {
		if err := w.Process(context.Background(), Record{Offset: int64(i), Key: fmt.Appendf(nil, "customer-%07d", i%keys),
			Value: labeledEvent(r, i, d, r.NormFloat64)}); err != nil {
			b.Fatal(err)
		}
	}
	all := make([]dirtyKey, 0, keys)
	for k, ks := range w.keys {
		all = append(all, dirtyKey{key: k, state: ks, applied: ks.Applied}) // encoded by the checkpoint
	}
	b.ReportAllocs()
	for b.Loop() {
		w.dirty = append(w.dirty[:0], all...)
		c, err := w.TakeCheckpoint()
		if err != nil || len(c.Keys) != len(all) {
			b.Fatalf("%d keys, %v", len(c.Keys), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(all)), "ns/key")
}
