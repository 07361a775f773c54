package learners

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The names docs/spec/DESIGN.md §3 promises to the CLI and configuration.
var designNames = []string{
	"perceptron", "modified-perceptron", "shifting-perceptron", "budget-perceptron",
	"threshold-tracker", "winnow2", "tracking-winnow", "swin", "weighted-majority",
	"odm", "dynamic-odm", "sop", "lasec",
	"perceptron-ss", "sop-ss", "lasec-ss", "bbq", "bbq-i",
}

// beyondPapers are the catalog's learners that no paper of docs/spec/DESIGN.md §3
// specifies: the baselines a user would otherwise pick.
var beyondPapers = []string{"logreg"}

func TestCatalogHasEveryDesignLearner(t *testing.T) {
	got := Names()
	a, b := slices.Clone(got), slices.Concat(designNames, beyondPapers)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Fatalf("catalog names %v, docs/spec/DESIGN.md §3 names %v", got, designNames)
	}
	covered := map[string]bool{}
	for _, c := range allCases() {
		covered[c.name] = true
	}
	for _, in := range Catalog() {
		if in.Source == "" || in.Summary == "" {
			t.Errorf("%s: missing source or summary", in.Name)
		}
		for _, p := range in.Params {
			if b, _ := json.Marshal(p.Default); p.Doc == "" || p.Default == nil || string(b) == "null" {
				t.Errorf("%s.%s: missing doc or default", in.Name, p.Name)
			}
		}
		if !covered[in.Name] {
			t.Errorf("%s: no test case in allCases", in.Name)
		}
		want := strings.HasSuffix(in.Name, "-ss") || strings.HasPrefix(in.Name, "bbq")
		if in.Sampling != want {
			t.Errorf("%s: Sampling = %v", in.Name, in.Sampling)
		}
	}
	if _, err := json.Marshal(Catalog()); err != nil {
		t.Fatalf("catalog is not JSON-encodable: %v", err)
	}
}

func TestNewDefaults(t *testing.T) {
	for _, name := range Names() {
		dim, params := 5, ""
		switch name {
		case "threshold-tracker":
			dim = 1
		case "weighted-majority":
			params = `{"members":[{"name":"perceptron"}]}`
		}
		l := mustNew(t, name, params, Config{Dim: dim})
		if l.Name() != name || l.Dim() != dim {
			t.Errorf("%s: Name/Dim = %s/%d", name, l.Name(), l.Dim())
		}
	}
}

// Several unknown parameters: the error names the first by name, every
// time (a Go map's order would pick one at random).
func TestUnknownParameterNamedTheSameEveryTime(t *testing.T) {
	for range 30 {
		_, err := New("swin", json.RawMessage(`{"zeta":1,"omega":2,"alfa":3,"mu":4}`), Config{Dim: 3})
		if err == nil || !strings.Contains(err.Error(), `unknown parameter "alfa"`) {
			t.Fatalf("err = %v, want the first unknown parameter by name, \"alfa\"", err)
		}
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name, params string
		dim          int
		wantErr      error
		wantText     []string // every fragment must appear in the message
	}{
		{"nope", "", 3, ErrUnknownLearner, []string{`"nope"`, "perceptron", "lasec-ss", "weighted-majority"}},
		{"perceptron", `{"alpha":2}`, 3, ErrParam, []string{`"alpha"`, "takes no parameters"}},
		{"swin", `{"alfa":2}`, 3, ErrParam, []string{`"alfa"`, "valid: alpha, beta, randomized, w0"}},
		{"swin", `{"alpha":"two"}`, 3, ErrParam, []string{"alpha", "string"}},
		{"swin", `[1,2]`, 3, ErrParam, []string{"JSON object"}},
		{"swin", `{"alpha":0.5}`, 3, ErrParam, []string{"alpha", "> 1"}},
		{"swin", `{"beta":0.9}`, 3, ErrParam, []string{"beta", "[0, ln α/(α−1))"}},
		{"swin", `{"beta":0.1,"w0":0.001}`, 3, ErrParam, []string{"w0", "β/n"}},
		{"shifting-perceptron", `{"lambda":0}`, 3, ErrParam, []string{"lambda", "> 0"}},
		{"budget-perceptron", `{"budget":0}`, 3, ErrParam, []string{"budget", "≥ 1"}},
		{"modified-perceptron", `{"init":"magic"}`, 3, ErrParam, []string{"init", "first-example, random, given"}},
		{"modified-perceptron", `{"init":"given","w0":[0,0,0]}`, 3, ErrParam, []string{"w0", "zero"}},
		{"modified-perceptron", `{"init":"given","w0":[1,2]}`, 3, ErrParam, []string{"w0", "length 3"}},
		{"threshold-tracker", "", 2, ErrParam, []string{"1-D", "dimension 1"}},
		{"winnow2", `{"theta":-1}`, 3, ErrParam, []string{"theta"}},
		{"tracking-winnow", `{"epsilon":0.5}`, 3, ErrParam, []string{"epsilon", "1/λ"}},
		{"tracking-winnow", `{"transform":2}`, 3, ErrParam, []string{"m", "transform"}},
		{"tracking-winnow", `{"delta":1.5}`, 3, ErrParam, []string{"delta", "(0, 1]"}},
		{"lasec", `{"b":2,"c":1}`, 3, ErrParam, []string{"c", "> b"}},
		{"lasec", `{"c":"huge"}`, 3, ErrParam, []string{"c", "inf"}},
		{"lasec-ss", `{"a":0}`, 3, ErrParam, []string{"a", "> 0"}},
		{"sop", `{"a":-1}`, 3, ErrParam, []string{"a", "> 0"}},
		{"bbq", `{"kappa":2}`, 3, ErrParam, []string{"kappa", "[0, 1]"}},
		{"odm", `{"theta":1}`, 3, ErrParam, []string{"theta", "[0, 1)"}},
		{"odm", `{"schedule":"constant","eta":1.5}`, 3, ErrParam, []string{"eta"}},
		{"odm", `{"schedule":"inv_t_offset"}`, 3, ErrParam, []string{"s0"}},
		{"dynamic-odm", `{"periods":[4,0]}`, 3, ErrParam, []string{"periods", "≥ 1"}},
		{"dynamic-odm", `{"init":"ones"}`, 3, ErrParam, []string{"init", "random or zero"}},
		{"weighted-majority", `{}`, 3, ErrParam, []string{"members", "at least one"}},
		{"weighted-majority", `{"members":[{"name":"bbq"}]}`, 3, ErrParam, []string{"bbq", "selective sampler"}},
		{"weighted-majority", `{"members":[{"name":"swin","params":{"alpha":0}}]}`, 3, ErrParam, []string{"member 0", "alpha"}},
		{"weighted-majority", `{"members":[{"name":"perceptronn"}]}`, 3, ErrUnknownLearner, []string{"member 0", "perceptronn"}},
		{"perceptron", "", 0, ErrParam, []string{"dimension 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name+tc.params, func(t *testing.T) {
			_, err := New(tc.name, json.RawMessage(tc.params), Config{Dim: tc.dim})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %q does not wrap %v", err, tc.wantErr)
			}
			for _, frag := range tc.wantText {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("error %q lacks %q", err, frag)
				}
			}
		})
	}
}

func TestInfiniteParamsRoundTripJSON(t *testing.T) {
	l := mustNew(t, "lasec-ss", `{"c":"inf","a":"+Infinity"}`, Config{Dim: 3})
	b := snapshot(t, l)
	r, err := Restore(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshot(t, r), b) {
		t.Fatal("restored snapshot differs")
	}
	if !strings.Contains(string(l.(*secondOrder).params), `"c":"inf"`) {
		t.Errorf("canonical params %s", l.(*secondOrder).params)
	}
}

// Predict must not change any state: snapshots before and after are equal.
func TestPredictIsPure(t *testing.T) {
	for _, c := range allCases() {
		t.Run(c.String(), func(t *testing.T) {
			l := c.build(t, 7, "k")
			s := c.stream(11, 120)
			play(t, l, stream{s.xs[:60], s.ys[:60]})
			before := snapshot(t, l)
			p1, err := l.Predict(s.xs[60])
			if err != nil {
				t.Fatal(err)
			}
			p2, _ := l.Predict(s.xs[60])
			if !bytes.Equal(before, snapshot(t, l)) {
				t.Fatal("Predict changed the state")
			}
			if math.Float64bits(p1.Score) != math.Float64bits(p2.Score) || p1.Label != p2.Label || p1.QueryProb != p2.QueryProb {
				t.Fatalf("repeated Predict differs: %+v vs %+v", p1, p2)
			}
		})
	}
}

// Snapshot at a random round, restore into a fresh learner (by New and by
// Restore), and both copies must go on bit-identically.
func TestStateRoundTrip(t *testing.T) {
	for _, c := range allCases() {
		t.Run(c.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 3))
			for trial := 0; trial < 3; trial++ {
				s := c.stream(uint64(20+trial), 300)
				cut := 1 + r.IntN(len(s.xs)-2)
				orig := c.build(t, 5, "key-a")
				play(t, orig, stream{s.xs[:cut], s.ys[:cut]})
				snap := snapshot(t, orig)

				fresh := c.build(t, 99, "other-key") // different seed: the snapshot must carry the RNG
				if err := fresh.UnmarshalBinary(snap); err != nil {
					t.Fatalf("UnmarshalBinary: %v", err)
				}
				restored, err := Restore(snap)
				if err != nil {
					t.Fatalf("Restore: %v", err)
				}
				if !bytes.Equal(snapshot(t, fresh), snap) || !bytes.Equal(snapshot(t, restored), snap) {
					t.Fatal("snapshot of the restored learner differs")
				}
				rest := stream{s.xs[cut:], s.ys[cut:]}
				a, b, cc := play(t, orig, rest), play(t, fresh, rest), play(t, restored, rest)
				for i := range a {
					if a[i] != b[i] || a[i] != cc[i] || math.Float64bits(a[i].score) != math.Float64bits(b[i].score) {
						t.Fatalf("cut %d, round %d after restore: %+v / %+v / %+v", cut, i, a[i], b[i], cc[i])
					}
				}
				if !bytes.Equal(snapshot(t, orig), snapshot(t, fresh)) || !bytes.Equal(snapshot(t, orig), snapshot(t, restored)) {
					t.Fatal("final snapshots differ")
				}
			}
		})
	}
}

func TestUnmarshalRejectsForeignAndCorruptSnapshots(t *testing.T) {
	for _, c := range allCases() {
		t.Run(c.String(), func(t *testing.T) {
			l := c.build(t, 1, "k")
			s := c.stream(4, 80)
			play(t, l, s)
			snap := snapshot(t, l)
			// Truncations must fail cleanly and leave the learner as it was.
			for _, n := range []int{0, 1, len(snap) / 2, len(snap) - 1} {
				if err := l.UnmarshalBinary(snap[:n]); !errors.Is(err, ErrSnapshot) {
					t.Fatalf("truncated to %d bytes: err = %v", n, err)
				}
				if !bytes.Equal(snapshot(t, l), snap) {
					t.Fatalf("failed restore of %d bytes changed the state", n)
				}
			}
			bad := append([]byte{FormatVersion + 1}, snap[1:]...)
			if err := l.UnmarshalBinary(bad); err == nil || !strings.Contains(err.Error(), "version") {
				t.Fatalf("future version: err = %v", err)
			}
			if err := l.UnmarshalBinary(append(slices.Clone(snap), 0)); !errors.Is(err, ErrSnapshot) {
				t.Fatalf("trailing byte: err = %v", err)
			}
			other := mustNew(t, "perceptron", "", Config{Dim: c.dim})
			if c.name != "perceptron" {
				if err := other.UnmarshalBinary(snap); !errors.Is(err, ErrSnapshot) {
					t.Fatalf("foreign snapshot accepted: %v", err)
				}
			}
		})
	}
}

func TestUnmarshalRejectsDifferentParams(t *testing.T) {
	a := mustNew(t, "shifting-perceptron", `{"lambda":0.1}`, Config{Dim: 4})
	b := mustNew(t, "shifting-perceptron", `{"lambda":0.2}`, Config{Dim: 4})
	err := b.UnmarshalBinary(snapshot(t, a))
	if !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "parameters") {
		t.Fatalf("err = %v", err)
	}
	c := mustNew(t, "shifting-perceptron", `{"lambda":0.1}`, Config{Dim: 5})
	if err := c.UnmarshalBinary(snapshot(t, a)); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("dimension mismatch accepted: %v", err)
	}
}

// Same seed and key give the same rounds; different keys give independent
// random streams (visible in the randomized learners' decisions).
func TestDeterminismAndKeyIndependence(t *testing.T) {
	for _, c := range allCases() {
		t.Run(c.String(), func(t *testing.T) {
			s := c.stream(8, 400)
			a := play(t, c.build(t, 42, "device-1"), s)
			b := play(t, c.build(t, 42, "device-1"), s)
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("round %d: %+v vs %+v", i, a[i], b[i])
				}
			}
		})
	}
	// Randomized learners: a different key (or seed) must change the draws.
	randomized := []learnerCase{
		gaussCase("perceptron-ss", ""), gaussCase("lasec-ss", `{"a":0.05}`),
		boolCase("swin", `{"randomized":true}`), gaussCase("budget-perceptron", `{"budget":3}`),
		gaussCase("modified-perceptron", `{"init":"random"}`), gaussCase("dynamic-odm", ""),
	}
	for _, c := range randomized {
		t.Run("keys/"+c.String(), func(t *testing.T) {
			s := c.stream(8, 400)
			a := play(t, c.build(t, 42, "device-1"), s)
			b := play(t, c.build(t, 42, "device-2"), s)
			d := play(t, c.build(t, 43, "device-1"), s)
			if slices.Equal(a, b) || slices.Equal(a, d) {
				t.Fatal("different keys or seeds gave identical randomized runs")
			}
		})
	}
}

func TestRNGStreamsAreIndependentAcrossKeys(t *testing.T) {
	// Uniform draws of neighbouring keys must be uncorrelated.
	const n = 20000
	a, b := rngFor(1, "key-1"), rngFor(1, "key-2")
	ra, rb := rand.New(&a), rand.New(&b)
	var sab, sa, sb, saa, sbb float64
	for i := 0; i < n; i++ {
		x, y := ra.Float64(), rb.Float64()
		sab += x * y
		sa += x
		sb += y
		saa += x * x
		sbb += y * y
	}
	cov := sab/n - sa/n*sb/n
	corr := cov / math.Sqrt((saa/n-sa*sa/n/n)*(sbb/n-sb*sb/n/n))
	if math.Abs(corr) > 4/math.Sqrt(n) {
		t.Fatalf("correlation %v between key streams", corr)
	}
}

// Bad inputs are errors and leave the state untouched.
func TestBadInputLeavesStateUntouched(t *testing.T) {
	for _, c := range allCases() {
		t.Run(c.String(), func(t *testing.T) {
			l := c.build(t, 1, "k")
			s := c.stream(5, 50)
			play(t, l, s)
			before := snapshot(t, l)
			good := s.xs[0]
			p, _ := l.Predict(good)

			wrongDim := mustDense(t, make([]float64, c.dim+1))
			nan := Vector{dim: c.dim, val: slices.Repeat([]float64{math.NaN()}, c.dim)} // bypasses the constructor
			inf := Vector{dim: c.dim, val: slices.Repeat([]float64{math.Inf(1)}, c.dim)}
			for name, x := range map[string]Vector{"wrong dimension": wrongDim, "NaN": nan, "+Inf": inf, "zero Vector": {}} {
				if _, err := l.Predict(x); err == nil {
					t.Errorf("Predict(%s): no error", name)
				}
				if err := l.Learn(x, 1, Prediction{}); err == nil {
					t.Errorf("Learn(%s): no error", name)
				}
			}
			for _, y := range []int{0, 2, -3} {
				if err := l.Learn(good, y, p); !errors.Is(err, ErrLabel) {
					t.Errorf("Learn(label %d): err = %v", y, err)
				}
			}
			if !bytes.Equal(before, snapshot(t, l)) {
				t.Fatal("a rejected input changed the state")
			}
		})
	}
}

func TestVectorConstructorsValidate(t *testing.T) {
	tests := []struct {
		name string
		make func() (Vector, error)
		frag string
	}{
		{"dense NaN", func() (Vector, error) { return NewDense([]float64{1, math.NaN()}) }, "x[1]"},
		{"dense -Inf", func() (Vector, error) { return NewDense([]float64{math.Inf(-1)}) }, "x[0]"},
		{"sparse out of range", func() (Vector, error) { return NewSparse(5, []int32{1, 5}, []float64{1, 1}) }, "out of range"},
		{"sparse negative index", func() (Vector, error) { return NewSparse(5, []int32{-1}, []float64{1}) }, "out of range"},
		{"sparse unsorted", func() (Vector, error) { return NewSparse(5, []int32{3, 1}, []float64{1, 1}) }, "increasing"},
		{"sparse duplicate", func() (Vector, error) { return NewSparse(5, []int32{1, 1}, []float64{1, 1}) }, "increasing"},
		{"sparse NaN", func() (Vector, error) { return NewSparse(5, []int32{2}, []float64{math.NaN()}) }, "x[2]"},
		{"sparse lengths", func() (Vector, error) { return NewSparse(5, []int32{2}, nil) }, "1 indices but 0 values"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.make()
			if err == nil || !strings.Contains(err.Error(), tc.frag) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.frag)
			}
		})
	}
	idx, val := SortSparse([]int32{4, 1, 4, 0}, []float64{1, 2, 3, 4})
	if !slices.Equal(idx, []int32{0, 1, 4}) || !slices.Equal(val, []float64{4, 2, 4}) {
		t.Fatalf("SortSparse = %v %v", idx, val)
	}
	x, _ := NewSparse(6, idx, val)
	if x.At(4) != 4 || x.At(3) != 0 || x.NNZ() != 3 || !x.Sparse() {
		t.Fatal("sparse accessors")
	}
	if !slices.Equal(x.Dense(), []float64{4, 2, 0, 0, 4, 0}) {
		t.Fatalf("Dense = %v", x.Dense())
	}
}

func TestDomainErrors(t *testing.T) {
	tests := []struct {
		name string
		dim  int
		x    []float64
	}{
		{"winnow2", 3, []float64{0.5, -0.1, 0}},
		{"winnow2", 3, []float64{0.5, 1.5, 0}},
		{"tracking-winnow", 3, []float64{2, 0, 0}},
		{"swin", 3, []float64{0.5, 0, 1}},
		{"threshold-tracker", 1, []float64{1.2}},
	}
	for _, tc := range tests {
		l := mustNew(t, tc.name, "", Config{Dim: tc.dim})
		x := mustDense(t, tc.x)
		if _, err := l.Predict(x); !errors.Is(err, ErrDomain) {
			t.Errorf("%s %v: err = %v", tc.name, tc.x, err)
		}
		if err := l.Learn(x, 1, Prediction{}); !errors.Is(err, ErrDomain) {
			t.Errorf("%s Learn %v: err = %v", tc.name, tc.x, err)
		}
	}
}

// Learn with a stale prediction (the state moved on, as with a delayed label)
// must recompute the margin rather than trust the old score.
func TestLearnWithStalePredictionRecomputes(t *testing.T) {
	l := mustNew(t, "perceptron", "", Config{Dim: 2})
	x1, x2 := mustDense(t, []float64{1, 0}), mustDense(t, []float64{1, 0})
	p1, _ := l.Predict(x1)
	p2, _ := l.Predict(x2) // both see w = 0
	if err := l.Learn(x1, 1, p1); err != nil {
		t.Fatal(err)
	}
	// With the stale p2 (score 0), a naive Learn would update again; the current
	// margin is 1 > 0, so no update must happen.
	if err := l.Learn(x2, 1, p2); err != nil {
		t.Fatal(err)
	}
	if w := l.(*perceptron).w; w[0] != 1 {
		t.Fatalf("w = %v, want [1 0]", w)
	}
}

func TestHasherIsStable(t *testing.T) {
	h, err := NewHasher(18)
	if err != nil {
		t.Fatal(err)
	}
	// Golden buckets: changing the hash silently would invalidate every
	// checkpoint taken with named features, so it must fail this test.
	golden := map[string]int32{"amount": 92521, "country=FR": 84028, "": 140069}
	for name, want := range golden {
		if got := h.Bucket(name); got != want {
			t.Errorf("Bucket(%q) = %d, want %d", name, got, want)
		}
	}
	x, err := h.Vector(map[string]float64{"amount": 12.5, "country=FR": 1})
	if err != nil {
		t.Fatal(err)
	}
	if x.Dim() != 1<<18 || x.NNZ() != 2 || x.At(92521) != 12.5 {
		t.Fatalf("hashed vector %v", x)
	}
	if _, err := h.Vector(map[string]float64{"a": math.NaN()}); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("NaN feature: %v", err)
	}
	for _, bits := range []int{0, MaxHashBits + 1} {
		if _, err := NewHasher(bits); err == nil {
			t.Errorf("NewHasher(%d): no error", bits)
		}
	}
	// Colliding names add up, in a deterministic order.
	h1, _ := NewHasher(1)
	y, _ := h1.Vector(map[string]float64{"a": 1, "b": 2, "c": 4, "d": 8})
	sum := 0.0
	y.Entries(func(_ int, v float64) { sum += v })
	if sum != 15 || y.NNZ() > 2 {
		t.Fatalf("collisions: %v", y)
	}
}

// A Maker builds, for any key and seed, the learner New builds: the same
// snapshot at the start and after 300 rounds, and the same rounds. The case
// with a slice parameter (w0) checks that learners of one Maker share none.
func TestMakerBuildsWhatNewBuilds(t *testing.T) {
	cases := append(allCases(), gaussCase("modified-perceptron", `{"init":"given","w0":[1,2,3,4,5,6,7,8]}`))
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			m, err := NewMaker(c.name, json.RawMessage(c.params), c.dim)
			if err != nil {
				t.Fatal(err)
			}
			s := c.stream(5, 300)
			for _, k := range []struct {
				seed uint64
				key  string
			}{{1, "a"}, {1, "b"}, {7, "a"}} {
				cfg := Config{Dim: c.dim, Seed: k.seed, Key: k.key}
				made, err := m.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				built := c.build(t, k.seed, k.key)
				if !bytes.Equal(snapshot(t, made), snapshot(t, built)) {
					t.Fatalf("seed %d key %s: fresh snapshots differ", k.seed, k.key)
				}
				sameRounds(t, "maker vs New", play(t, made, s), play(t, built, s))
				if !bytes.Equal(snapshot(t, made), snapshot(t, built)) {
					t.Fatalf("seed %d key %s: snapshots differ after the stream", k.seed, k.key)
				}
			}
		})
	}
}

func TestMakerRejects(t *testing.T) {
	for _, tc := range []struct {
		name, params string
		dim          int
		want         error
	}{
		{"no-such-learner", "", 3, ErrUnknownLearner},
		{"perceptron", `{"nope":1}`, 3, ErrParam},
		{"lasec", `{"b":-1}`, 3, ErrParam},
		{"perceptron", "", 0, ErrParam},
	} {
		if _, err := NewMaker(tc.name, json.RawMessage(tc.params), tc.dim); !errors.Is(err, tc.want) {
			t.Errorf("NewMaker(%s, %s, %d) = %v, want %v", tc.name, tc.params, tc.dim, err, tc.want)
		}
	}
	m, err := NewMaker("perceptron", nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.New(Config{Dim: 4}); !errors.Is(err, ErrParam) {
		t.Fatalf("a maker of dimension 3 built dimension 4: %v", err)
	}
}

// TestSnapshotCarriesEveryStream checks what a restore relies on to skip
// seeding (pipeline builds restored keys with an unseeded Config): a
// snapshot restored into a learner built for another seed and key, or none,
// continues exactly as the learner it was taken from — every random stream
// a learner draws from is in its snapshot.
func TestSnapshotCarriesEveryStream(t *testing.T) {
	cases := append(allCases(), gaussCase("modified-perceptron", `{"init":"random"}`))
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			m, err := NewMaker(c.name, json.RawMessage(c.params), c.dim)
			if err != nil {
				t.Fatal(err)
			}
			first, rest := c.stream(5, 300), c.stream(6, 300)
			orig, err := m.New(Config{Dim: c.dim, Seed: 3, Key: "k"})
			if err != nil {
				t.Fatal(err)
			}
			play(t, orig, first)
			snap := snapshot(t, orig)
			want := play(t, orig, rest)
			for _, cfg := range []Config{{Dim: c.dim}, {Dim: c.dim, Seed: 9, Key: "other"}} {
				restored, err := m.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := restored.UnmarshalBinary(snap); err != nil {
					t.Fatal(err)
				}
				sameRounds(t, fmt.Sprintf("restored into seed %d key %q", cfg.Seed, cfg.Key), play(t, restored, rest), want)
				if !bytes.Equal(snapshot(t, restored), snapshot(t, orig)) {
					t.Fatalf("seed %d key %q: snapshots differ after the stream", cfg.Seed, cfg.Key)
				}
			}
		})
	}
}

// A snapshot split into version, identity and body joins back to itself,
// for every learner of the catalog; a damaged header is refused.
func TestSplitSnapshotJoinsBack(t *testing.T) {
	tested := 0
	for _, name := range Names() {
		l, err := New(name, nil, Config{Dim: 5, Seed: 3, Key: "k"})
		if err != nil { // a 1-D learner
			l, err = New(name, nil, Config{Dim: 1, Seed: 3, Key: "k"})
		}
		if err != nil {
			continue // a learner without default parameters (an ensemble)
		}
		tested++
		snap, err := l.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		v, id, body, err := SplitSnapshot(snap)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if v != snap[0] || len(id) < len(name)+2 || !bytes.Contains(id, []byte(name)) {
			t.Errorf("%s: version %d, identity %q", name, v, id)
		}
		if back := JoinSnapshot(nil, v, id, body); !bytes.Equal(back, snap) {
			t.Errorf("%s: joined back differs", name)
		}
	}
	if tested < len(Names())-2 {
		t.Errorf("%d of %d learners tested", tested, len(Names()))
	}
	if _, _, _, err := SplitSnapshot([]byte{2, 0xff}); !errors.Is(err, ErrSnapshot) {
		t.Errorf("a damaged header: %v", err)
	}
}
