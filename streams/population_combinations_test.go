package streams

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/driftstream/driftstream/learners"
)

type combo interface {
	predict(key string, x learners.Vector) int
	learn(key string, x learners.Vector, y int)
}

// own / global / wm over learners
type lset struct {
	name  string
	dim   int
	m     map[string]learners.Learner
	seed  uint64
	asked map[string]bool // per key: the last round's query decision
}

func (s *lset) get(k string) learners.Learner {
	l := s.m[k]
	if l == nil {
		l, _ = learners.New(s.name, nil, learners.Config{Dim: s.dim, Seed: s.seed})
		s.m[k] = l
	}
	return l
}

// warm: a key's learner starts as a copy of the population's
type warmC struct {
	own, pop *lset
}

func (c warmC) predict(k string, x learners.Vector) int {
	if c.own.m[k] == nil {
		b, _ := c.pop.get("").MarshalBinary()
		l, _ := learners.Restore(b)
		c.own.m[k] = l
	}
	return ownC{c.own}.predict(k, x)
}
func (c warmC) learn(k string, x learners.Vector, y int) {
	ownC{c.pop}.learn("", x, y)
	ownC{c.own}.learn(k, x, y)
}

type ownC struct{ s *lset }

func (c ownC) predict(k string, x learners.Vector) int {
	p, _ := c.s.get(k).Predict(x)
	p = c.s.get(k).Decide(p)
	if c.s.asked == nil {
		c.s.asked = map[string]bool{}
	}
	c.s.asked[k] = p.Query
	return p.Label
}
func (c ownC) learn(k string, x learners.Vector, y int) {
	l := c.s.get(k)
	if k != "" && !c.s.asked[k] {
		return // a sampler key learns only what it asked for; the population ("") every label
	}
	p, _ := l.Predict(x)
	l.Learn(x, y, p)
}

type globalC struct{ s *lset }

func (c globalC) predict(k string, x learners.Vector) int  { return ownC(c).predict("", x) }
func (c globalC) learn(k string, x learners.Vector, y int) { ownC(c).learn("", x, y) }

type wmC struct {
	own, pop     *lset
	beta, share  float64
	init         float64
	warm         bool
	w            map[string]*[2]float64
	lastP, lastO int
}

func (c *wmC) weights(k string) *[2]float64 {
	w := c.w[k]
	if w == nil {
		w = &[2]float64{1, c.init}
		c.w[k] = w
	}
	return w
}
func (c *wmC) predict(k string, x learners.Vector) int {
	if c.warm && c.own.m[k] == nil {
		b, _ := c.pop.get("").MarshalBinary()
		l, _ := learners.Restore(b)
		c.own.m[k] = l
	}
	c.lastP = ownC{c.pop}.predict("", x)
	c.lastO = ownC{c.own}.predict(k, x)
	w := c.weights(k)
	if w[1] > w[0] {
		return c.lastO
	}
	return c.lastP
}
func (c *wmC) learn(k string, x learners.Vector, y int) {
	w := c.weights(k)
	if c.lastP != y {
		w[0] *= c.beta
	}
	if c.lastO != y {
		w[1] *= c.beta
	}
	s := w[0] + w[1]
	w[0], w[1] = w[0]/s, w[1]/s
	w[0] = (1-c.share)*w[0] + c.share*0.5
	w[1] = (1-c.share)*w[1] + c.share*0.5
	ownC{c.pop}.learn("", x, y)
	ownC{c.own}.learn(k, x, y)
}

// additive perceptron: (w0 + wk)·x
type addC struct {
	d                int
	w0               []float64
	wk               map[string][]float64
	shared, specific float64
}

func (c *addC) vec(k string) []float64 {
	v := c.wk[k]
	if v == nil {
		v = make([]float64, c.d)
		c.wk[k] = v
	}
	return v
}
func (c *addC) score(k string, x learners.Vector) float64 {
	wk := c.vec(k)
	m := 0.0
	x.Entries(func(i int, v float64) { m += (c.w0[i] + wk[i]) * v })
	return m
}
func (c *addC) predict(k string, x learners.Vector) int {
	if c.score(k, x) >= 0 {
		return 1
	}
	return -1
}
func (c *addC) learn(k string, x learners.Vector, y int) {
	if float64(y)*c.score(k, x) > 0 {
		return
	}
	wk := c.vec(k)
	x.Entries(func(i int, v float64) { c.w0[i] += c.shared * float64(y) * v; wk[i] += c.specific * float64(y) * v })
}

// hashed multitask: one learner over x ⊕ hashed key copy
type hashC struct {
	l    learners.Learner
	d, b int
}

func (c *hashC) feat(k string, x learners.Vector) learners.Vector {
	v := make([]float64, c.d+c.b)
	x.Entries(func(i int, xv float64) {
		v[i] += xv
		h := fnv.New64a()
		h.Write([]byte(k))
		h.Write([]byte(strconv.Itoa(i)))
		s := h.Sum64()
		sign := 1.0
		if s>>63 == 1 {
			sign = -1
		}
		v[c.d+int(s%uint64(c.b))] += sign * xv
	})
	out, _ := learners.NewDense(v)
	return out
}
func (c *hashC) predict(k string, x learners.Vector) int {
	p, _ := c.l.Predict(c.feat(k, x))
	return c.l.Decide(p).Label
}
func (c *hashC) learn(k string, x learners.Vector, y int) {
	f := c.feat(k, x)
	p, _ := c.l.Predict(f)
	c.l.Learn(f, y, p)
}

// BenchmarkPopulationCombinations is the exploration that chose how a key's
// learner and the population model combine (issue 34; docs/POPULATION.md):
// on a keyed stream, outside the pipeline, one learner per key ("own"), one
// for all ("global"), a per-key weighted majority over {global, own} ("wm",
// β and fixed share s), its variant whose own learner starts as a copy of
// the global one ("warm+wm"), a copy alone ("warm"), and for the
// perceptron the additive shared + specific model and the hashed multitask
// features of Weinberger et al. (2¹² buckets; a perceptron for every
// learner), accuracy overall and per bucket of keys by their events (1–10,
// 11–100, 101–1,000, more). A sampler's key learns only what it asked for.
//
//	POPL=perceptron POPSPEC='synth:population?T=100000&keys=5000&zipf=1.1' go test -run '^$' -bench PopulationCombinations -benchtime 1x -v ./streams
func BenchmarkPopulationCombinations(b *testing.B) {
	for b.Loop() {
		populationCombinations(b)
	}
}

func populationCombinations(t *testing.B) {
	spec := os.Getenv("POPSPEC")
	if spec == "" {
		spec = "synth:population?T=100000&keys=5000&zipf=1.1"
	}
	learner := os.Getenv("POPL")
	if learner == "" {
		learner = "perceptron"
	}
	seeds := []uint64{1, 2, 3}
	mk := map[string]func(d int, seed uint64) combo{
		"own": func(d int, seed uint64) combo {
			return ownC{&lset{name: learner, dim: d, m: map[string]learners.Learner{}, seed: seed}}
		},
		"global": func(d int, seed uint64) combo {
			return globalC{&lset{name: learner, dim: d, m: map[string]learners.Learner{}, seed: seed}}
		},
	}
	for _, beta := range []float64{0.5, 0.8} {
		for _, share := range []float64{0.01, 0.05} {
			for _, init := range []float64{0.5} {
				b, s, in := beta, share, init
				mk[fmt.Sprintf("wm b=%g s=%g", b, s)] = func(d int, seed uint64) combo {
					return &wmC{own: &lset{name: learner, dim: d, m: map[string]learners.Learner{}, seed: seed}, pop: &lset{name: learner, dim: d, m: map[string]learners.Learner{}, seed: seed}, beta: b, share: s, init: in, w: map[string]*[2]float64{}}
				}
			}
		}
	}
	for _, init := range []float64{1, 0.5} {
		in := init
		mk[fmt.Sprintf("warm+wm init=%g", in)] = func(d int, seed uint64) combo {
			return &wmC{own: &lset{name: learner, dim: d, m: map[string]learners.Learner{}, seed: seed}, pop: &lset{name: learner, dim: d, m: map[string]learners.Learner{}, seed: seed}, beta: 0.8, share: 0.01, init: in, warm: true, w: map[string]*[2]float64{}}
		}
	}
	mk["warm"] = func(d int, seed uint64) combo {
		return warmC{own: &lset{name: learner, dim: d, m: map[string]learners.Learner{}, seed: seed}, pop: &lset{name: learner, dim: d, m: map[string]learners.Learner{}, seed: seed}}
	}
	if learner == "perceptron" {
		mk["additive"] = func(d int, seed uint64) combo {
			return &addC{d: d, w0: make([]float64, d), wk: map[string][]float64{}, shared: 1, specific: 1}
		}
	}
	mk["hashed"] = func(d int, seed uint64) combo {
		hl := learner
		if learner != "perceptron" {
			hl = "perceptron"
		}
		l, err := learners.New(hl, nil, learners.Config{Dim: d + 1<<12, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return &hashC{l: l, d: d, b: 1 << 12}
	}
	type acc struct{ right, n [5]float64 }
	res := map[string]*acc{}
	for _, seed := range seeds {
		// first pass: key counts
		src, err := OpenSynth(spec, seed)
		if err != nil {
			t.Fatal(err)
		}
		var exs []Example
		counts := map[string]int{}
		for {
			ex, err := src.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			exs = append(exs, ex)
			counts[ex.Key]++
		}
		bucket := func(k string) int {
			n := counts[k]
			switch {
			case n <= 10:
				return 0
			case n <= 100:
				return 1
			case n <= 1000:
				return 2
			}
			return 3
		}
		for name, f := range mk {
			c := f(src.Dim(), seed)
			a := res[name]
			if a == nil {
				a = &acc{}
				res[name] = a
			}
			early := 0
			for _, ex := range exs {
				p := c.predict(ex.Key, ex.X)
				b := bucket(ex.Key)
				a.n[b]++
				a.n[4]++
				if p == ex.Label {
					a.right[b]++
					a.right[4]++
				}
				c.learn(ex.Key, ex.X, ex.Label)
				_ = early
			}
		}
	}
	var names []string
	for n := range res {
		names = append(names, n)
	}
	sortStrings(names)
	t.Logf("%s %s seeds %v", learner, spec, seeds)
	for _, n := range names {
		a := res[n]
		s := fmt.Sprintf("%-18s all %.4f |", n, a.right[4]/a.n[4])
		for b := 0; b < 4; b++ {
			s += fmt.Sprintf(" %.4f (%d)", a.right[b]/math.Max(a.n[b], 1), int(a.n[b]))
		}
		t.Log(s)
	}
}

func sortStrings(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}
