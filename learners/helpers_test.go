package learners

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// stream is a labeled input sequence for tests.
type stream struct {
	xs []Vector
	ys []int
}

// round is what a learner did on one round.
type round struct {
	label   int
	score   float64
	prob    float64
	qprob   float64
	query   bool
	updated bool
}

func mustNew(t testing.TB, name, params string, cfg Config) Learner {
	t.Helper()
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	l, err := New(name, raw, cfg)
	if err != nil {
		t.Fatalf("New(%s, %s): %v", name, params, err)
	}
	return l
}

func mustDense(t testing.TB, v []float64) Vector {
	t.Helper()
	x, err := NewDense(v)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// play runs the prequential protocol (predict, decide, learn if queried) over
// s and records every round. Update rounds are read from the prediction stamps.
func play(t testing.TB, l Learner, s stream) []round {
	t.Helper()
	out := make([]round, len(s.xs))
	var prev uint64
	for i, x := range s.xs {
		p, err := l.Predict(x)
		if err != nil {
			t.Fatalf("%s round %d: Predict: %v", l.Name(), i, err)
		}
		if i > 0 {
			out[i-1].updated = p.stamp != prev
		}
		prev = p.stamp
		p = l.Decide(p)
		out[i] = round{label: p.Label, score: p.Score, prob: p.Prob, qprob: p.QueryProb, query: p.Query}
		if p.Query {
			if err := l.Learn(x, s.ys[i], p); err != nil {
				t.Fatalf("%s round %d: Learn: %v", l.Name(), i, err)
			}
		}
	}
	if n := len(s.xs); n > 0 {
		if p, err := l.Predict(s.xs[n-1]); err == nil {
			out[n-1].updated = p.stamp != prev
		}
	}
	return out
}

// sameRounds requires identical labels, queries and update rounds.
func sameRounds(t *testing.T, what string, a, b []round) {
	t.Helper()
	for i := range a {
		if a[i].label != b[i].label || a[i].query != b[i].query || a[i].updated != b[i].updated {
			t.Fatalf("%s: round %d differs: %+v vs %+v", what, i, a[i], b[i])
		}
	}
}

func countUpdates(rs []round) int {
	n := 0
	for _, r := range rs {
		if r.updated {
			n++
		}
	}
	return n
}

func mistakes(rs []round, s stream) int {
	n := 0
	for i, r := range rs {
		if r.label != s.ys[i] {
			n++
		}
	}
	return n
}

// gaussStream draws x ~ N(0, I_d) with labels sgn(u·x) from a target u that
// is re-drawn every period rounds (period 0: never) — the seed-004 stream.
func gaussStream(seed uint64, T, d, period int) stream {
	r := rand.New(rand.NewPCG(seed, 1))
	u := make([]float64, d)
	draw := func() {
		for i := range u {
			u[i] = r.NormFloat64()
		}
	}
	draw()
	var s stream
	for t := 0; t < T; t++ {
		if period > 0 && t > 0 && t%period == 0 {
			draw()
		}
		v := make([]float64, d)
		for i := range v {
			v[i] = r.NormFloat64()
		}
		x, _ := NewDense(v)
		s.xs = append(s.xs, x)
		s.ys = append(s.ys, sign(dot(u, x)))
	}
	return s
}

// sparseStream draws sparse inputs with nnz Gaussian entries out of d,
// labelled by a drifting dense target.
func sparseStream(seed uint64, T, d, nnz, period int) stream {
	r := rand.New(rand.NewPCG(seed, 2))
	u := make([]float64, d)
	draw := func() {
		for i := range u {
			u[i] = r.NormFloat64()
		}
	}
	draw()
	var s stream
	for t := 0; t < T; t++ {
		if period > 0 && t > 0 && t%period == 0 {
			draw()
		}
		seen := map[int32]bool{}
		var idx []int32
		var val []float64
		for len(idx) < nnz {
			i := int32(r.IntN(d))
			if seen[i] {
				continue
			}
			seen[i] = true
			idx = append(idx, i)
			val = append(val, r.NormFloat64())
		}
		idx, val = SortSparse(idx, val)
		x, err := NewSparse(d, idx, val)
		if err != nil {
			panic(err)
		}
		s.xs = append(s.xs, x)
		s.ys = append(s.ys, sign(dot(u, x)))
	}
	return s
}

// boolStream draws Boolean inputs (fair coins) labelled by a monotone
// disjunction of k attributes that shifts every period rounds; a fraction
// noise of labels is flipped.
func boolStream(seed uint64, T, n, k, period int, noise float64) stream {
	r := rand.New(rand.NewPCG(seed, 3))
	active := r.Perm(n)[:k]
	var s stream
	for t := 0; t < T; t++ {
		if period > 0 && t > 0 && t%period == 0 {
			active = r.Perm(n)[:k]
		}
		v := make([]float64, n)
		for i := range v {
			if r.IntN(4) == 0 { // sparse-ish: P(1) = 1/4, so the disjunction is not always on
				v[i] = 1
			}
		}
		y := -1
		for _, a := range active {
			if v[a] == 1 {
				y = 1
			}
		}
		if r.Float64() < noise {
			y = -y
		}
		x, _ := NewDense(v)
		s.xs = append(s.xs, x)
		s.ys = append(s.ys, y)
	}
	return s
}

// boxStream draws x ∈ [0,1]ⁿ (half of the entries zero) labelled by a
// drifting nonnegative linear threshold.
func boxStream(seed uint64, T, n int) stream {
	r := rand.New(rand.NewPCG(seed, 4))
	var s stream
	for t := 0; t < T; t++ {
		v := make([]float64, n)
		for i := range v {
			if r.IntN(2) == 0 {
				v[i] = r.Float64()
			}
		}
		shift := (t / 150) % 3
		y := sign(v[shift] + v[shift+1] - 0.8) // fixed-size windows of relevant attributes
		x, _ := NewDense(v)
		s.xs = append(s.xs, x)
		s.ys = append(s.ys, y)
	}
	return s
}

// unitStream normalizes a Gaussian stream to ‖x‖ = 1.
func unitStream(seed uint64, T, d, period int) stream {
	s := gaussStream(seed, T, d, period)
	for i, x := range s.xs {
		s.xs[i] = x.Scale(1 / math.Sqrt(x.SquaredNorm()))
	}
	return s
}

// lineStream is the threshold tracker's test stream: x ~ U[0,1], τ a
// reflected random walk with steps in [−γ, γ]; label 1 iff x ≥ τ.
func lineStream(seed uint64, T int, gamma float64) (stream, []float64) {
	r := rand.New(rand.NewPCG(seed, 5))
	tau := 0.5
	var s stream
	var taus []float64
	for t := 0; t < T; t++ {
		v := r.Float64()
		y := -1
		if v >= tau {
			y = 1
		}
		x, _ := NewDense([]float64{v})
		s.xs = append(s.xs, x)
		s.ys = append(s.ys, y)
		taus = append(taus, tau)
		tau += (2*r.Float64() - 1) * gamma
		if tau < 0 {
			tau = -tau
		}
		if tau > 1 {
			tau = 2 - tau
		}
	}
	return s, taus
}

// learnerCase is one configured learner with a stream from its domain.
type learnerCase struct {
	name, params string
	dim          int
	stream       func(seed uint64, T int) stream
}

func gaussCase(name, params string) learnerCase {
	return learnerCase{name, params, 8, func(seed uint64, T int) stream { return gaussStream(seed, T, 8, 100) }}
}

func sparseCase(name, params string) learnerCase {
	return learnerCase{name, params, 40, func(seed uint64, T int) stream { return sparseStream(seed, T, 40, 4, 100) }}
}

func boolCase(name, params string) learnerCase {
	return learnerCase{name, params, 20, func(seed uint64, T int) stream { return boolStream(seed, T, 20, 2, 150, 0.02) }}
}

// allCases covers every catalog learner, several in more than one mode.
func allCases() []learnerCase {
	box := func(seed uint64, T int) stream { return boxStream(seed, T, 12) }
	return []learnerCase{
		gaussCase("perceptron", ""),
		sparseCase("perceptron", ""),
		gaussCase("modified-perceptron", ""),
		gaussCase("modified-perceptron", `{"init":"random"}`),
		sparseCase("modified-perceptron", `{"renormalize_every":0}`),
		gaussCase("shifting-perceptron", `{"lambda":0.05}`),
		sparseCase("shifting-perceptron", ""),
		gaussCase("budget-perceptron", `{"budget":7}`),
		sparseCase("budget-perceptron", `{"budget":5,"evict_among_all":true,"recompute_every":3}`),
		{"threshold-tracker", `{"gamma":0.02}`, 1, func(seed uint64, T int) stream { s, _ := lineStream(seed, T, 0.02); return s }},
		{"winnow2", "", 12, box},
		boolCase("winnow2", `{"demote_to_zero":true,"theta":3}`),
		{"tracking-winnow", "", 12, box},
		{"tracking-winnow", `{"transform":1,"m":0.4}`, 12, box},
		{"tracking-winnow", `{"transform":2,"m":0.4,"lambda":6}`, 12, box},
		boolCase("swin", ""),
		boolCase("swin", `{"randomized":true}`),
		boolCase("weighted-majority", `{"members":[{"name":"swin","params":{"randomized":true}},{"name":"tracking-winnow"},{"name":"winnow2","params":{"theta":2}}]}`),
		gaussCase("odm", ""),
		sparseCase("odm", `{"schedule":"constant","eta":0.0001}`),
		gaussCase("dynamic-odm", `{"horizon":300}`),
		sparseCase("dynamic-odm", `{"init":"zero","candidates":4,"epochs":"paper","C":2}`),
		gaussCase("sop", ""),
		sparseCase("sop", `{"diagonal":true}`),
		gaussCase("lasec", ""),
		sparseCase("lasec", ""),
		sparseCase("lasec", `{"diagonal":true,"c":20}`),
		gaussCase("perceptron-ss", ""),
		gaussCase("sop-ss", ""),
		sparseCase("sop-ss", `{"diagonal":true,"b":0.1}`),
		gaussCase("lasec-ss", `{"a":0.05}`),
		sparseCase("lasec-ss", `{"c":"inf"}`),
		gaussCase("bbq", `{"kappa":0.4}`),
		gaussCase("bbq-i", `{"kappa":0.3,"rho":0.5}`),
		gaussCase("logreg", ""),
		sparseCase("logreg", `{"eta":0.5,"l2":0.001}`),
		gaussCase("logreg", `{"slow":0,"prior":0}`),
		gaussCase("logreg", `{"weigh":"logloss","prior":0}`),
	}
}

func (c learnerCase) String() string { return c.name + c.params }

func (c learnerCase) build(t testing.TB, seed uint64, key string) Learner {
	return mustNew(t, c.name, c.params, Config{Dim: c.dim, Seed: seed, Key: key})
}

func snapshot(t testing.TB, l Learner) []byte {
	t.Helper()
	b, err := l.MarshalBinary()
	if err != nil {
		t.Fatalf("%s: MarshalBinary: %v", l.Name(), err)
	}
	return b
}

// full unpacks the covariance into a d×d row-major matrix.
func (r *rls) full() []float64 {
	out := make([]float64, r.d*r.d)
	for i := 0; i < r.d; i++ {
		for j := 0; j < r.d; j++ {
			out[i*r.d+j] = r.at(i, j)
		}
	}
	return out
}
