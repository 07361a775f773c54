package learners

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchShape is one input regime of the benchmark grid.
type benchShape struct {
	name string
	dim  int
	nnz  int // nonzeros per input; = dim for dense
}

var benchShapes = []benchShape{
	{"dense-10", 10, 10},
	{"dense-50", 50, 50},
	{"dense-1000", 1000, 1000},
	{"sparse-1pct-of-100000", 100000, 1000},
}

// benchLearner is one benchmarked configuration: domain says which inputs it
// accepts, maxDim excludes shapes whose state would not fit (a full d×d
// covariance at d = 100,000 is 80 GB).
type benchLearner struct {
	name, params string
	domain       string // real, box, bool
	maxDim       int
}

func benchLearners() []benchLearner {
	const all = 1 << 30
	return []benchLearner{
		{"perceptron", "", "real", all},
		{"modified-perceptron", "", "real", all},
		{"shifting-perceptron", "", "real", all},
		{"budget-perceptron", "", "real", all},
		{"winnow2", "", "box", all},
		{"tracking-winnow", "", "box", all},
		{"swin", "", "bool", all},
		{"swin", `{"randomized":true}`, "bool", all},
		{"weighted-majority", `{"members":[{"name":"tracking-winnow","params":{"delta":0.25}},{"name":"tracking-winnow","params":{"delta":0.5}},{"name":"tracking-winnow","params":{"delta":1}}]}`, "box", all},
		{"odm", `{"lambda":1,"theta":0.3,"schedule":"inv_t"}`, "real", all},
		{"dynamic-odm", `{"horizon":100000,"lambda":1,"theta":0.3,"schedule":"inv_t"}`, "real", all},
		{"dynamic-odm", `{"horizon":100000,"init":"zero","lambda":1,"theta":0.3,"schedule":"inv_t"}`, "real", all},
		{"perceptron-ss", "", "real", all},
		{"sop", "", "real", 1000},
		{"sop", `{"diagonal":true}`, "real", all},
		{"lasec", "", "real", 1000},
		{"lasec", `{"diagonal":true}`, "real", all},
		{"sop-ss", "", "real", 1000},
		{"sop-ss", `{"diagonal":true}`, "real", all},
		{"lasec-ss", "", "real", 1000},
		{"lasec-ss", `{"diagonal":true}`, "real", all},
		{"bbq", "", "real", 1000},
		{"bbq-i", "", "real", 1000},
		{"logreg", "", "real", all},
	}
}

// benchInputs builds a pool of inputs of the shape and domain, labelled by a
// target that flips sign halfway through the pool, with 10% label noise: the
// pool is larger than the dimension and not separable, so learners keep
// updating for as long as the benchmark runs (upd/round reports the rate).
func benchInputs(sh benchShape, domain string) ([]Vector, []int) {
	const pool = 4096
	r := rand.New(rand.NewPCG(1, uint64(sh.dim)))
	u := make([]float64, sh.dim)
	for i := range u {
		u[i] = r.NormFloat64()
	}
	value := func() float64 {
		switch domain {
		case "box":
			return r.Float64()
		case "bool":
			return 1
		}
		return r.NormFloat64()
	}
	xs, ys := make([]Vector, pool), make([]int, pool)
	for k := range xs {
		if sh.nnz == sh.dim {
			v := make([]float64, sh.dim)
			for i := range v {
				if domain == "bool" {
					v[i] = float64(r.IntN(2))
				} else {
					v[i] = value()
				}
			}
			xs[k], _ = NewDense(v)
		} else {
			idx := make([]int32, 0, sh.nnz)
			seen := map[int32]bool{}
			for len(idx) < sh.nnz {
				i := int32(r.IntN(sh.dim))
				if !seen[i] {
					seen[i] = true
					idx = append(idx, i)
				}
			}
			val := make([]float64, sh.nnz)
			for i := range val {
				val[i] = value()
			}
			idx, val = SortSparse(idx, val)
			xs[k], _ = NewSparse(sh.dim, idx, val)
		}
		m := dot(u, xs[k])
		if domain != "real" {
			m -= 0.5 * float64(sh.nnz) * 0.1 // a threshold concept on nonnegative inputs
		}
		ys[k] = sign(m)
		if k >= pool/2 {
			ys[k] = -ys[k]
		}
		if r.IntN(10) == 0 {
			ys[k] = -ys[k]
		}
	}
	return xs, ys
}

// BenchmarkLearners measures one prequential round (Predict, Decide, Learn) of
// every learner on every shape; ns/nnz divides by the nonzeros per input.
// Run: go test -run '^$' -bench . ./learners/
func BenchmarkLearners(b *testing.B) {
	for _, bl := range benchLearners() {
		for _, sh := range benchShapes {
			if sh.dim > bl.maxDim {
				continue
			}
			name := bl.name
			if bl.params != "" {
				name += bl.params
			}
			b.Run(fmt.Sprintf("%s/%s", name, sh.name), func(b *testing.B) {
				xs, ys := benchInputs(sh, bl.domain)
				l := mustNew(b, bl.name, bl.params, Config{Dim: sh.dim, Seed: 1, Key: "bench"})
				b.ReportAllocs()
				b.ResetTimer()
				var stamp uint64
				updates := 0
				for i := 0; i < b.N; i++ {
					k := i % len(xs)
					p, err := l.Predict(xs[k])
					if err != nil {
						b.Fatal(err)
					}
					if p.stamp != stamp {
						updates++
						stamp = p.stamp
					}
					p = l.Decide(p)
					if p.Query {
						if err := l.Learn(xs[k], ys[k], p); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(sh.nnz), "ns/nnz")
				b.ReportMetric(float64(updates)/float64(b.N), "upd/round")
			})
		}
	}
	b.Run("threshold-tracker/dense-1", func(b *testing.B) {
		s, _ := lineStream(1, 512, 0.01)
		l := mustNew(b, "threshold-tracker", "", Config{Dim: 1})
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			k := i % len(s.xs)
			p, _ := l.Predict(s.xs[k])
			l.Learn(s.xs[k], s.ys[k], l.Decide(p))
		}
	})
}

// BenchmarkLASECUpdate isolates the exact O(d²) LASEC update at d = 50, whose
// target is ≤ 20 µs: every round is forced to update.
func BenchmarkLASECUpdate(b *testing.B) {
	for _, d := range []int{50, 200} {
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			xs, ys := benchInputs(benchShape{"", d, d}, "real")
			l := mustNew(b, "lasec", "", Config{Dim: d}).(*secondOrder)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := i % len(xs)
				l.r.update(xs[k], ys[k])
			}
		})
	}
}
