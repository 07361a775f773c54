package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"

	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

// BenchmarkKeyMemory reports the heap a worker holds per key — learner,
// key state, map entry and key — for every learner at d = 10 and 50, after
// 20 labeled events per key on [0,1]-valued inputs (valid for every
// learner), against the learner's raw state (learners.StateWords, its most
// words over its life). The goal is bytes/key ≤ 1.5 × raw bytes.
// The "+detectors" runs add the service's default drift detectors (ADWIN on
// mistakes and on queries), for the memory sizing of a deployment.
//
//	go test -run '^$' -bench KeyMemory -benchtime 1x ./pipeline
func BenchmarkKeyMemory(b *testing.B) {
	defaults := []keyed.DetectorSpec{{Detector: "adwin", Signal: keyed.SignalMistakes}, {Detector: "adwin", Signal: keyed.SignalQueries}}
	for _, dim := range []int{10, 50} {
		for _, run := range []struct {
			name   string
			specs  []keyed.DetectorSpec
			subset bool // only the learners of the sizing table
		}{{"", nil, false}, {"+detectors", defaults, true}} {
			for _, name := range learners.Names() {
				words, err := learners.StateWords(name, nil, dim)
				if err != nil || words == 0 || (run.subset && name != "perceptron" && name != "lasec-ss") {
					continue // needs parameters (the ensembles' members)
				}
				b.Run(fmt.Sprintf("%s-d%d%s", name, dim, run.name), func(b *testing.B) {
					benchKeyMemory(b, name, dim, words, run.specs)
				})
			}
		}
	}
}

func benchKeyMemory(b *testing.B, name string, dim int, words int64, detectors []keyed.DetectorSpec) {
	vec, _ := topics.NewVectorizer(dim, 0)
	cfg := Config{Settings: keyed.Settings{Learner: name, Seed: 1, Vector: vec, QueryScale: 1, Detectors: detectors}}
	nkeys := max(200, min(5000, 4_000_000/int(words*8)))
	r := rand.New(rand.NewPCG(1, uint64(dim)))
	var recs []Record
	for i := range nkeys * 20 {
		v := labeledEvent(r, i, dim, func() float64 { return float64(r.IntN(2)) })
		recs = append(recs, Record{Offset: int64(i), Key: fmt.Appendf(nil, "customer-%07d", i%nkeys), Value: v})
	}
	for range b.N {
		before := liveHeap()
		w, err := NewWorker(cfg, 0)
		if err != nil {
			b.Skip(err)
		}
		for _, rec := range recs {
			if err := w.Process(context.Background(), rec); err != nil {
				b.Fatal(err)
			}
			w.TakeOutputs()
		}
		if w.Totals().DeadLetters > 0 {
			b.Skipf("%d dead letters: inputs outside the learner's domain", w.Totals().DeadLetters)
		}
		perKey := float64(liveHeap()-before) / float64(nkeys)
		runtime.KeepAlive(w)
		b.ReportMetric(perKey, "bytes/key")
		b.ReportMetric(float64(words*8), "raw-bytes")
		b.ReportMetric(perKey/float64(words*8), "ratio")
	}
}

// labeledEvent is event i with dim values drawn from value, then a label
// drawn from r.
func labeledEvent(r *rand.Rand, i, dim int, value func() float64) []byte {
	v := fmt.Appendf(nil, `{"id":"e%d","x":[`, i)
	for d := range dim {
		if d > 0 {
			v = append(v, ',')
		}
		v = strconv.AppendFloat(v, value(), 'f', -1, 64)
	}
	return fmt.Appendf(v, `],"label":%d}`, 1-2*r.IntN(2))
}

// liveHeap is the heap's live bytes, after a collection.
func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
