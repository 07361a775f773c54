package streams

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/driftstream/driftstream/learners"
)

// population is a keyed stream with population structure (issue 34): every
// key's concept is a shared hyperplane plus a deviation of its own,
//
//	w_k = (w₀ + dev·u_k)/‖w₀ + dev·u_k‖,  y = sgn(w_k·x), x ~ N(0, I_d),
//
// with w₀ and every u_k unit vectors drawn from N(0, I). A share depart of
// the keys follow a concept of their own (w_k = u_k). The shared w₀ is
// re-drawn every shared_period events of the stream (its drift points), and
// each key re-draws its u_k after a geometric number of its own events of
// mean key_period (0: never). Keys come with Zipf frequencies: the key of
// rank r (from 0) is drawn with probability ∝ (1 + r)^−zipf, among keys
// ranks, and named key-RANK. Labels flip with probability noise.
//
// RNG streams: 1 keys, 2 inputs, 3 the shared concept, 4 the keys' concepts
// and their drift, 5 noise.
func population(p *params, seed uint64) (Source, error) {
	d := p.int("d", 10, 1, "dimension")
	T := p.int("T", 100000, 1, "stream length")
	keys := p.int("keys", 1000, 1, "number of keys")
	zipf := p.float("zipf", 1.2, 1.0001, 10, "Zipf exponent s of the key frequencies (rank r drawn ∝ (1+r)^−s)")
	dev := p.float("dev", 0.5, 0, 100, "size of each key's own deviation from the shared concept (0: all keys share it)")
	depart := p.float("depart", 0.1, 0, 1, "share of keys whose concept is their own, not the population's")
	sharedPeriod := p.int("shared_period", 0, 0, "events of the stream between re-draws of the shared concept (0: never)")
	keyPeriod := p.int("key_period", 0, 0, "mean of a key's own events between re-draws of its deviation (0: never)")
	noise := p.float("noise", 0.05, 0, 0.5, "label noise rate")
	if p.describe || p.err != nil {
		return nil, p.err
	}
	g := &populationSource{d: d, T: T, dev: dev, noise: noise, sharedPeriod: sharedPeriod, keyPeriod: keyPeriod,
		pick: rngStream(seed, 1), inputs: rngStream(seed, 2), shared: rngStream(seed, 3), own: rngStream(seed, 4), flips: rngStream(seed, 5),
		keys: make([]popKey, keys), w0: make([]float64, d)}
	g.zipf = rand.NewZipf(g.pick, zipf, 1, uint64(keys-1))
	unit(g.shared, g.w0)
	for k := range g.keys {
		g.keys[k] = popKey{u: make([]float64, d), w: make([]float64, d), departs: g.own.Float64() < depart}
		g.redraw(k)
	}
	if sharedPeriod > 0 {
		g.drifts = every(sharedPeriod, T)
	}
	return g, nil
}

// popKey is one key of a population stream.
type popKey struct {
	u, w    []float64 // its own direction, its concept
	departs bool      // its concept is u alone
	events  int       // its events so far
	next    int       // its event at which u is re-drawn (0: never)
}

type populationSource struct {
	d, T, t                 int
	dev, noise              float64
	sharedPeriod, keyPeriod int
	pick, inputs, shared    *rand.Rand
	own, flips              *rand.Rand
	zipf                    *rand.Zipf
	w0                      []float64
	keys                    []popKey
	drifts                  []int
}

func (g *populationSource) Dim() int { return g.d }

// DriftPoints are the shared concept's re-draws; each key's own re-draws are
// its own (they are not drift points of the stream).
func (g *populationSource) DriftPoints() []int { return g.drifts }

// redraw draws key k's own direction and rebuilds its concept.
func (g *populationSource) redraw(k int) {
	key := &g.keys[k]
	unit(g.own, key.u)
	if g.keyPeriod > 0 {
		key.next = key.events + 1 + int(g.own.ExpFloat64()*float64(g.keyPeriod))
	}
	g.concept(k)
}

// concept rebuilds key k's concept from the shared one and its own.
func (g *populationSource) concept(k int) {
	key := &g.keys[k]
	if key.departs {
		copy(key.w, key.u)
		return
	}
	for i := range key.w {
		key.w[i] = g.w0[i] + g.dev*key.u[i]
	}
	normalize(key.w)
}

func (g *populationSource) Next(ctx context.Context) (Example, error) {
	if err := ctx.Err(); err != nil {
		return Example{}, err
	}
	if g.t >= g.T {
		return Example{}, io.EOF
	}
	if g.sharedPeriod > 0 && g.t > 0 && g.t%g.sharedPeriod == 0 {
		unit(g.shared, g.w0)
		for k := range g.keys {
			g.concept(k)
		}
	}
	k := int(g.zipf.Uint64())
	key := &g.keys[k]
	if key.next > 0 && key.events >= key.next {
		g.redraw(k)
	}
	x := make([]float64, g.d)
	normals(g.inputs, x, 1)
	m := 0.0
	for i, xi := range x {
		m += key.w[i] * xi
	}
	y := sgn(m)
	if g.flips.Float64() < g.noise {
		y = -y
	}
	v, err := learners.NewDense(x)
	if err != nil {
		return Example{}, fmt.Errorf("generated example %d: %w", g.t, err)
	}
	ex := Example{ID: strconv.Itoa(key.events), Key: "key-" + strconv.Itoa(k), X: v, Label: y}
	key.events++
	g.t++
	return ex, nil
}

// unit draws a direction uniformly: v ~ N(0, I), normalized.
func unit(r *rand.Rand, v []float64) {
	normals(r, v, 1)
	normalize(v)
}

func normalize(v []float64) {
	n := 0.0
	for _, x := range v {
		n += x * x
	}
	if n = math.Sqrt(n); n > 0 {
		for i := range v {
			v[i] /= n
		}
	}
}
