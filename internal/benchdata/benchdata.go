// Package benchdata generates the keyed event streams the CPU benchmarks
// run, so that the real-broker benchmark (service's BenchmarkRealKafkaCPU)
// and the pipeline's share of it without the broker (pipeline's
// BenchmarkShippedCPU) read the same events: inputs to 4 decimals labeled by
// a fixed hyperplane, keys drawn uniformly, and optionally labels as real
// deployments get them, late or never.
package benchdata

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
)

// Point draws an event's input of dimension dim from r, as JSON with 4
// decimals, and its label: the sign of a fixed hyperplane's margin.
func Point(r *rand.Rand, dim int) (xs []byte, y int) {
	x := make([]float64, dim)
	m := 0.0
	for d := range x {
		x[d] = float64(int(r.NormFloat64()*1e4)) / 1e4
		m += float64(d%3-1) * x[d]
	}
	y = 1
	if m < 0 {
		y = -1
	}
	xs, _ = json.Marshal(x) // finite values: Marshal cannot fail
	return xs, y
}

// Stream calls emit with the records of n events of dimension dim over
// keys keys ("k0", "k1", ...), in order, events "e0" on. Every event
// carries its label, or with late half of them do, a quarter get it in a
// label record 30 to 80 events later (after the event that makes it due),
// and a quarter never. The draws are fixed: the same arguments give the
// same records.
func Stream(n, dim, keys int, late bool, emit func(key, value []byte)) {
	r := rand.New(rand.NewPCG(1, 1))
	lr := rand.New(rand.NewPCG(2, 2)) // late labels' draws, apart: inline histories stay as they were
	type due struct {
		at         int
		key, value []byte
	}
	var dues []due
	for i := range n {
		xs, y := Point(r, dim)
		key := fmt.Appendf(nil, "k%d", r.IntN(keys))
		u := 0 // 0, 1: the label inline; 2: late; 3: never
		if late {
			u = lr.IntN(4)
		}
		if u < 2 {
			emit(key, fmt.Appendf(nil, `{"id":"e%d","x":%s,"label":%d}`, i, xs, y))
		} else {
			emit(key, fmt.Appendf(nil, `{"id":"e%d","x":%s}`, i, xs))
		}
		if u == 2 {
			d := due{i + 30 + lr.IntN(51), key, fmt.Appendf(nil, `{"id":"e%d","label":%d}`, i, y)}
			at := sort.Search(len(dues), func(j int) bool { return dues[j].at > d.at }) // after those due as early: kept in order
			dues = slices.Insert(dues, at, d)
		}
		for len(dues) > 0 && (dues[0].at <= i || i == n-1) {
			emit(dues[0].key, dues[0].value)
			dues = dues[1:]
		}
	}
}
