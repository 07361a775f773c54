package learners

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// One AdaGrad step on the log loss, worked by hand: from w = 0 the margin is
// 0, the slope of log(1+e^(−y·m)) at 0 is −y/2, so every touched coordinate
// gets G = (xᵢ/2)² and moves by η·y·sign(xᵢ) — AdaGrad's first step is η in
// every coordinate's own scale. The second step is checked the same way.
func TestLogRegSteps(t *testing.T) {
	for _, decay := range []float64{1, 0.9} {
		t.Run(fmt.Sprint("decay ", decay), func(t *testing.T) { testLogRegSteps(t, decay) })
	}
}

func testLogRegSteps(t *testing.T, decay float64) {
	l := mustNew(t, "logreg", fmt.Sprintf(`{"eta":0.5,"decay":%g,"slow":0,"prior":0}`, decay), Config{Dim: 3}) // one step size (TestLogRegTwoStepSizes has two), no prior (TestLogRegPriorKeepsTheInputsShape)
	x := mustDense(t, []float64{2, -0.5, 0})
	p, err := l.Predict(x)
	if err != nil {
		t.Fatal(err)
	}
	if p.Score != 0 || p.Posterior() != 0.5 || !p.HasPosterior || p.Label != 1 || p.Prob != 1 {
		t.Fatalf("fresh prediction %+v", p)
	}
	if err := l.Learn(x, -1, l.Decide(p)); err != nil {
		t.Fatal(err)
	}
	lr := l.(*logreg)
	want := []float64{-0.5, 0.5, 0}
	for i := range want {
		if lr.w[i] != want[i] {
			t.Fatalf("after one step w = %v, want %v", lr.w, want)
		}
	}
	// Second step on y = +1: m = −1.25, slope g = −σ(1.25).
	p, _ = l.Predict(x)
	m := -0.5*2 + 0.5*-0.5
	if p.Score != m || math.Abs(p.Posterior()-1/(1+math.Exp(-m))) > 1e-15 {
		t.Fatalf("second prediction %+v, margin want %g", p, m)
	}
	if err := l.Learn(x, 1, p); err != nil {
		t.Fatal(err)
	}
	g := -1 / (1 + math.Exp(m))
	for i, xi := range []float64{2, -0.5} {
		g0 := 0.5 * xi // first step's gradient: −y/2·xᵢ with y = −1
		gi := g * xi
		w := want[i] - 0.5*gi/math.Sqrt(decay*g0*g0+gi*gi)
		if math.Abs(lr.w[i]-w) > 1e-15 {
			t.Fatalf("coordinate %d after two steps: %g, want %g", i, lr.w[i], w)
		}
	}
	if lr.w[2] != 0 || lr.g2[2] != 0 {
		t.Fatalf("an untouched coordinate moved: %v %v", lr.w, lr.g2)
	}
}

// The prior worked by hand: the first label sets every accumulator to
// prior·mean(gⱼ²) over the input's entries before its own step, so the
// first step keeps the input's shape — in the limit of a large prior a
// plain gradient step, w ∝ −g·x — where without it every touched
// coordinate moves by η. Untouched coordinates keep the start (it decays
// at their next touch) and do not move.
func TestLogRegPriorKeepsTheInputsShape(t *testing.T) {
	const eta, decay = 0.5, 0.9
	for _, prior := range []float64{0, 0.5, 3, 1e6} {
		t.Run(fmt.Sprint("prior ", prior), func(t *testing.T) {
			l := mustNew(t, "logreg", fmt.Sprintf(`{"eta":%g,"decay":%g,"slow":0,"prior":%g}`, eta, decay, prior), Config{Dim: 3})
			x := mustDense(t, []float64{2, -0.5, 0})
			if err := l.(Summand).LearnSum(x, -1, 0); err != nil {
				t.Fatal(err)
			}
			// y = −1 at margin 0: slope g = 1/2, g·x = (1, −1/4, 0).
			gx := []float64{1, -0.25, 0}
			g0 := prior * (1 + 0.0625 + 0) / 3
			lr := l.(*logreg)
			for i, v := range gx {
				want, wantG := 0.0, g0
				if v != 0 {
					wantG = decay*g0 + v*v
					want = -eta * v / math.Sqrt(wantG)
				}
				if math.Abs(lr.w[i]-want) > 1e-15 || math.Abs(lr.g2[i]-wantG) > 1e-15 {
					t.Fatalf("coordinate %d: w %g G %g, want %g %g", i, lr.w[i], lr.g2[i], want, wantG)
				}
			}
			ratio := lr.w[0] / lr.w[1] // the input's is 2/−0.5 = −4
			switch {
			case prior == 0 && ratio != -1:
				t.Fatalf("without a prior w₀/w₁ = %g, want −1 (η each)", ratio)
			case prior == 1e6 && math.Abs(ratio+4) > 1e-5:
				t.Fatalf("with a large prior w₀/w₁ = %g, want the input's −4", ratio)
			}
			// A second label does not set the start again.
			before := lr.g2[2]
			if err := l.(Summand).LearnSum(mustDense(t, []float64{0, 1, 0}), 1, 0); err != nil {
				t.Fatal(err)
			}
			if lr.g2[2] != before {
				t.Fatalf("the second label moved an untouched accumulator: %g → %g", before, lr.g2[2])
			}
		})
	}
}

// Logistic regression learns from every label, right or wrong; LearnSum at
// its own margin is Learn; LearnSum at another margin steps by that margin.
func TestLogRegLearnsEveryLabelAndSums(t *testing.T) {
	s := gaussStream(3, 200, 5, 0)
	a := mustNew(t, "logreg", "", Config{Dim: 5})
	b := mustNew(t, "logreg", "", Config{Dim: 5}).(Summand)
	for i, x := range s.xs {
		p, _ := a.Predict(x)
		before := a.(*logreg).version
		if err := a.Learn(x, s.ys[i], a.Decide(p)); err != nil {
			t.Fatal(err)
		}
		if a.(*logreg).version != before+1 {
			t.Fatalf("round %d: no step (right predictions teach a logistic model too)", i)
		}
		q, _ := b.Predict(x)
		if err := b.LearnSum(x, s.ys[i], q.Score); err != nil {
			t.Fatal(err)
		}
	}
	sa, sb := snapshot(t, a), snapshot(t, b)
	if string(sa) != string(sb) {
		t.Fatal("LearnSum at the learner's own margin differs from Learn")
	}
	// After a first step, a step at a sure right sum is tiny and one at a
	// sure wrong sum is not.
	x := s.xs[0]
	c := mustNew(t, "logreg", "", Config{Dim: 5}).(Summand)
	if err := c.LearnSum(x, 1, 0); err != nil {
		t.Fatal(err)
	}
	w0 := c.(*logreg).w[0]
	if err := c.LearnSum(x, 1, 50); err != nil {
		t.Fatal(err)
	}
	if moved := math.Abs(c.(*logreg).w[0] - w0); moved > 1e-15 {
		t.Fatalf("step at a sure right sum moved w[0] by %g", moved)
	}
	if err := c.LearnSum(x, 1, -50); err != nil {
		t.Fatal(err)
	}
	if moved := math.Abs(c.(*logreg).w[0] - w0); moved < 0.05 {
		t.Fatalf("step at a sure wrong sum moved w[0] by %g only", moved)
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		if err := c.LearnSum(x, 1, bad); err == nil {
			t.Fatalf("LearnSum accepted the sum %g", bad)
		}
	}
	if err := c.LearnSum(x, 0, 1); !errors.Is(err, ErrLabel) {
		t.Fatalf("label 0: %v", err)
	}
}

// On a stationary logistic stream with 20% label noise a logistic model
// beats the Perceptron, whose fixed steps chase the noise: the reason it
// is in the catalog.
func TestLogRegBeatsThePerceptronOnNoisyLabels(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const d, T = 10, 20000
	u := make([]float64, d)
	for i := range u {
		u[i] = r.NormFloat64()
	}
	lr := mustNew(t, "logreg", `{"decay":1}`, Config{Dim: d}) // AdaGrad: a stationary concept
	pc := mustNew(t, "perceptron", "", Config{Dim: d})
	var wrongLR, wrongPC int
	for t0 := 0; t0 < T; t0++ {
		v := make([]float64, d)
		for i := range v {
			v[i] = r.NormFloat64()
		}
		x, _ := NewDense(v)
		y := sign(dot(u, x))
		if r.Float64() < 0.2 {
			y = -y
		}
		for _, l := range []Learner{lr, pc} {
			p, _ := l.Predict(x)
			p = l.Decide(p)
			if p.Label != y && t0 >= T/2 {
				if l == lr {
					wrongLR++
				} else {
					wrongPC++
				}
			}
			if err := l.Learn(x, y, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	accLR, accPC := 1-float64(wrongLR)/(T/2), 1-float64(wrongPC)/(T/2)
	// The Bayes rate is 0.80.
	if accLR < 0.77 || accLR < accPC+0.05 {
		t.Fatalf("second half accuracy: logreg %.3f, perceptron %.3f", accLR, accPC)
	}
}

// The mistake-driven summands update exactly when the sum is wrong.
func TestMistakeDrivenSummands(t *testing.T) {
	for _, name := range []string{"perceptron", "sop", "lasec", "lasec-ss"} {
		t.Run(name, func(t *testing.T) {
			l, ok := mustNew(t, name, "", Config{Dim: 3}).(Summand)
			if !ok {
				t.Fatalf("%s is not a Summand", name)
			}
			x := mustDense(t, []float64{1, 2, -1})
			before := snapshot(t, l)
			if err := l.LearnSum(x, 1, 0.5); err != nil {
				t.Fatal(err)
			}
			if string(snapshot(t, l)) != string(before) {
				t.Fatal("updated on a right sum")
			}
			if err := l.LearnSum(x, 1, -0.5); err != nil {
				t.Fatal(err)
			}
			if string(snapshot(t, l)) == string(before) {
				t.Fatal("no update on a wrong sum")
			}
		})
	}
}

// On a concept re-drawn every 2,000 rounds, the default decay (0.99) keeps
// the steps large enough to follow it; AdaGrad's (decay 1) shrink as 1/√t
// and fall behind after the first few concepts.
func TestLogRegDecayTracksADrift(t *testing.T) {
	s := gaussStream(5, 20000, 10, 2000)
	acc := func(params string) float64 {
		l := mustNew(t, "logreg", params, Config{Dim: 10})
		rs := play(t, l, s)
		right := 0
		for i := len(rs) / 2; i < len(rs); i++ {
			if rs[i].label == s.ys[i] {
				right++
			}
		}
		return float64(right) / float64(len(rs)-len(rs)/2)
	}
	tracking, adagrad := acc(""), acc(`{"decay":1}`)
	if tracking < adagrad+0.03 {
		t.Fatalf("second half accuracy: decay 0.99 %.3f, AdaGrad %.3f", tracking, adagrad)
	}
}

// logRegReplay is the two-copy logreg of the doc comment, written again
// from it: fast weights w and slow ws over the fast copy's accumulators g2
// (started at the first label by the prior), a running difference D of the
// copies' errors (or log losses) weighing them, each copy stepping at rest +
// its own margin.
type logRegReplay struct {
	eta, decay, slow, sel, prior float64
	logLoss                      bool
	w, ws, g2                    []float64
	diff                         float64
	labels                       int
}

func (r *logRegReplay) margin(w []float64, x []float64) float64 {
	m := 0.0
	for i, v := range x {
		m += w[i] * v
	}
	return m
}

// mixed is the learner's margin on x: the copies' margins weighted by
// e^(−loss), normalized — the fast copy's weight 1/(1 + e^D).
func (r *logRegReplay) mixed(x []float64) float64 {
	a := 1 / (1 + math.Exp(r.diff))
	return a*r.margin(r.w, x) + (1-a)*r.margin(r.ws, x)
}

func (r *logRegReplay) learn(x []float64, y int, rest float64) {
	mw, ms := rest+r.margin(r.w, x), rest+r.margin(r.ws, x)
	loss := func(m float64) float64 {
		if r.logLoss {
			return math.Log(1 + math.Exp(-float64(y)*m))
		}
		if float64(y)*m == 0 {
			return 0.5
		}
		return map[bool]float64{true: 0, false: 1}[float64(y)*m > 0]
	}
	r.diff = r.sel*r.diff + loss(mw) - loss(ms)
	g, gs := -float64(y)/(1+math.Exp(float64(y)*mw)), -float64(y)/(1+math.Exp(float64(y)*ms))
	if r.labels++; r.labels == 1 {
		mean := 0.0
		for _, v := range x {
			mean += g * v * g * v / float64(len(x))
		}
		for i := range r.g2 {
			r.g2[i] = r.prior * mean
		}
	}
	for i, v := range x {
		if g*v == 0 {
			continue
		}
		r.g2[i] = r.decay*r.g2[i] + g*v*g*v
		r.w[i] -= r.eta * g * v / math.Sqrt(r.g2[i])
		r.ws[i] -= r.slow * r.eta * gs * v / math.Max(math.Sqrt(r.g2[i]), math.Abs(gs*v))
	}
}

// The two step sizes replayed by hand: the fast copy is the one-copy
// learner bit for bit, the slow copy steps by slow·η over the fast copy's
// accumulators (or over its own slope where that is larger), the margin mixes the copies' by exponential weights on
// their recent errors (or log losses), and inside a sum each copy learns at
// the other parts' margin plus its own; with and without the prior.
func TestLogRegTwoStepSizes(t *testing.T) {
	const d = 6
	s := gaussStream(21, 3000, d, 500)
	for _, c := range []struct {
		name  string
		rest  func(i int) float64 // the other parts' margin; nil: Learn alone
		weigh string
		prior float64
	}{
		{"alone", nil, "errors", 3},
		{"in a sum", func(i int) float64 { return math.Sin(float64(i)) }, "errors", 3},
		{"alone by log loss", nil, "logloss", 0},
		{"in a sum by log loss", func(i int) float64 { return math.Sin(float64(i)) }, "logloss", 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := mustNew(t, "logreg", fmt.Sprintf(`{"eta":0.3,"decay":0.95,"slow":0.1,"select":0.9,"weigh":%q,"prior":%g}`, c.weigh, c.prior), Config{Dim: d})
			one := mustNew(t, "logreg", fmt.Sprintf(`{"eta":0.3,"decay":0.95,"slow":0,"prior":%g}`, c.prior), Config{Dim: d})
			r := &logRegReplay{eta: 0.3, decay: 0.95, slow: 0.1, sel: 0.9, prior: c.prior, logLoss: c.weigh == "logloss",
				w: make([]float64, d), ws: make([]float64, d), g2: make([]float64, d)}
			slowLeads := 0
			for i, x := range s.xs {
				v, _ := x.DenseValues()
				p, err := l.Predict(x)
				if err != nil {
					t.Fatal(err)
				}
				// To rounding: dot may sum in another order (packed_amd64.s).
				if want := r.mixed(v); math.Abs(p.Score-want) > 1e-12 || p.Posterior() != Sigmoid(p.Score) {
					t.Fatalf("round %d: margin %g, replay %g", i, p.Score, want)
				}
				if r.diff > 0 {
					slowLeads++
				}
				if c.rest == nil {
					err = l.Learn(x, s.ys[i], l.Decide(p))
					q, _ := one.Predict(x)
					if err := one.Learn(x, s.ys[i], one.Decide(q)); err != nil {
						t.Fatal(err)
					}
					r.learn(v, s.ys[i], 0)
				} else {
					err = l.(Summand).LearnSum(x, s.ys[i], c.rest(i)+p.Score)
					r.learn(v, s.ys[i], c.rest(i))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			lr := l.(*logreg)
			for i := range r.w {
				if math.Abs(lr.w[i]-r.w[i]) > 1e-12 || math.Abs(lr.ws[i]-r.ws[i]) > 1e-12 {
					t.Fatalf("weights %v / %v, replay %v / %v", lr.w, lr.ws, r.w, r.ws)
				}
				if c.rest == nil && lr.w[i] != one.(*logreg).w[i] {
					t.Fatalf("fast copy %v, one-copy learner %v", lr.w, one.(*logreg).w)
				}
			}
			if math.Abs(lr.lossDiff-r.diff) > 1e-9 {
				t.Fatalf("loss difference %g, replay %g", lr.lossDiff, r.diff)
			}
			if slowLeads == 0 || slowLeads == len(s.xs) {
				t.Fatalf("the slow copy weighed more in %d of %d rounds: the weights never moved both ways", slowLeads, len(s.xs))
			}
		})
	}
}

// The choice earns its keep both ways: on a stationary stream with 20%
// label noise the two copies predict about as well as slow steps alone and
// better than fast steps alone; on a concept re-drawn every 300 rounds, about
// as well as fast steps alone and better than slow steps alone.
func TestLogRegChoosesTheStepThatFits(t *testing.T) {
	acc := func(params string, s stream) float64 {
		l := mustNew(t, "logreg", params, Config{Dim: 10})
		rs := play(t, l, s)
		right := 0
		for i := range rs {
			if rs[i].label == s.ys[i] {
				right++
			}
		}
		return float64(right) / float64(len(rs))
	}
	noisy := gaussStream(31, 20000, 10, 0)
	r := rand.New(rand.NewPCG(31, 2))
	for i := range noisy.ys {
		if r.Float64() < 0.2 {
			noisy.ys[i] = -noisy.ys[i]
		}
	}
	for _, c := range []struct {
		name        string
		s           stream
		fits, other string
	}{
		{"stationary and noisy", noisy, `{"eta":0.02,"slow":0}`, `{"slow":0}`},
		{"drifting", gaussStream(32, 20000, 10, 300), `{"slow":0}`, `{"eta":0.02,"slow":0}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			both, fits, other := acc("", c.s), acc(c.fits, c.s), acc(c.other, c.s)
			t.Logf("two copies %.4f, the step that fits %.4f, the other %.4f", both, fits, other)
			if both < fits-0.01 || both < other+0.01 {
				t.Fatalf("two copies %.4f against %.4f (fits) and %.4f", both, fits, other)
			}
		})
	}
}

// A snapshot whose loss difference is not finite is refused.
func TestLogRegRefusesABadLossDifference(t *testing.T) {
	l := mustNew(t, "logreg", "", Config{Dim: 2})
	b := snapshot(t, l)
	for _, bad := range []float64{math.NaN(), math.Inf(-1)} {
		c := append([]byte(nil), b...)
		binary.LittleEndian.PutUint64(c[len(c)-8:], math.Float64bits(bad))
		if err := mustNew(t, "logreg", "", Config{Dim: 2}).(*logreg).UnmarshalBinary(c); err == nil {
			t.Fatalf("loss difference %g accepted", bad)
		}
	}
	if err := mustNew(t, "logreg", "", Config{Dim: 2}).(*logreg).UnmarshalBinary(b); err != nil {
		t.Fatalf("the control: %v", err)
	}
}

// Snapshots of the learners the default was before — the one-step
// learner (until 29 November) and the first two-step learner, weighing by
// log loss without a prior (29 November) — name the parameters those builds
// wrote (their bytes are pinned in TestSnapshotBytesAreStable), restore as
// those learners and go on as they do; a configuration that leaves the new
// parameters out takes today's defaults.
func TestLogRegSnapshotsOfBefore(t *testing.T) {
	s := gaussStream(41, 400, 4, 0)
	for _, c := range []struct {
		name, params, wrote string
		slow, byErrors      bool
	}{
		{"one step", `{"slow":0,"prior":0}`, `{"eta":0.25,"l2":0,"decay":0.99}`, false, false},
		{"two steps by log loss", `{"weigh":"logloss","prior":0}`, `{"eta":0.25,"l2":0,"decay":0.99,"slow":0.08,"select":0.999}`, true, false},
		{"today's default", ``, `{"eta":0.25,"l2":0,"decay":0.99,"slow":0.08,"select":0.999,"weigh":"errors","prior":3}`, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := mustNew(t, "logreg", c.params, Config{Dim: 4})
			play(t, l, stream{xs: s.xs[:200], ys: s.ys[:200]})
			snap := snapshot(t, l)
			if !strings.Contains(string(snap), c.wrote) {
				t.Fatalf("the snapshot's parameters are not %s: %q", c.wrote, snap)
			}
			back, err := Restore(snap)
			if err != nil {
				t.Fatal(err)
			}
			lr := back.(*logreg)
			if (lr.ws != nil) != c.slow || lr.byErrors != c.byErrors || (lr.prior == 0) == (c.params == "") {
				t.Fatalf("restored with slow copy %v, by errors %v, prior %g", lr.ws != nil, lr.byErrors, lr.prior)
			}
			rest := stream{xs: s.xs[200:], ys: s.ys[200:]}
			play(t, l, rest)
			play(t, back, rest)
			if string(snapshot(t, l)) != string(snapshot(t, back)) {
				t.Fatal("the restored learner went on differently")
			}
		})
	}
	if l := mustNew(t, "logreg", `{"eta":0.5}`, Config{Dim: 4}).(*logreg); l.ws == nil || l.slowEta != 0.5*0.08 || !l.byErrors || l.prior != 3 {
		t.Fatalf("a configuration of eta alone: slow copy %v, step %g, by errors %v, prior %g", l.ws != nil, l.slowEta, l.byErrors, l.prior)
	}
}

// Bad values of the new parameters are refused with the parameter's name.
func TestLogRegRefusesBadWeighAndPrior(t *testing.T) {
	for _, c := range []struct{ params, want string }{
		{`{"weigh":"hinge"}`, "weigh"},
		{`{"weigh":""}`, "weigh"},
		{`{"prior":-1}`, "prior"},
		{`{"prior":"inf"}`, "prior"},
	} {
		_, err := New("logreg", []byte(c.params), Config{Dim: 2})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.params, err, c.want)
		}
	}
}

// A label the rest of the sum already gets right by hundreds in the margin
// has a slope below what a float64 can square (about e^-373): it moves no
// weight, and the learner's margins stay finite, whatever the accumulators
// held. It failed before: such a slope squared to 0, the coordinate's
// accumulator stayed 0, and the step divided by it (Inf weights, then NaN
// margins; found at 1,000,000 keys × 10 events on a real broker, where the
// shared part grew sure of a separable concept).
func TestLogRegTinySlopesStayFinite(t *testing.T) {
	x, _ := NewDense([]float64{0.5, -1, 2, 1})
	for _, params := range []string{"", `{"slow":0}`, `{"prior":0}`, `{"slow":0,"prior":0,"decay":1}`} {
		for _, sum := range []float64{40, 372, 400, 745, 800, 1e6} {
			for _, y := range []int{1, -1} {
				l := mustNew(t, "logreg", params, Config{Dim: 4}).(Summand)
				// A first label (the start of the accumulators), then
				// another on the same coordinates, then one after a label
				// that did move the weights.
				for _, s := range []float64{sum, sum, -1, sum} {
					if err := l.LearnSum(x, y, float64(y)*s); err != nil {
						t.Fatalf("%s, sum %g, y %d: %v", params, sum, y, err)
					}
					p, err := l.Predict(x)
					if err != nil || math.IsNaN(p.Score) || math.IsInf(p.Score, 0) {
						t.Fatalf("%s, sum %g, y %d, after a label at %g: margin %g, %v", params, sum, y, s, p.Score, err)
					}
				}
			}
		}
	}
}

// TestLogRegSlowStepsAreBoundedByTheirEta checks that the slow copy, which
// steps over the fast copy's accumulators, moves no coordinate by more
// than slow·η in one label, as the fast copy moves none by more than η.
// Within a sum of parts the two copies can disagree: here the other parts'
// margin sits between them, so the fast copy is right, surely, after a run
// that emptied its accumulators of large slopes, and the slow copy is
// wrong (on air quality 0.1% of the slow steps were so, up to 27 times
// slow·η).
func TestLogRegSlowStepsAreBoundedByTheirEta(t *testing.T) {
	for _, params := range []string{"", `{"weigh":"logloss"}`, `{"prior":0}`, `{"l2":0.01}`} {
		l := mustNew(t, "logreg", params, Config{Dim: 3}).(*logreg)
		x, _ := NewDense([]float64{1, 0.5, -0.25})
		before := make([]float64, len(l.ws))
		var worst float64
		for n := range 1200 {
			p, err := l.Predict(x)
			if err != nil {
				t.Fatal(err)
			}
			// A stationary run alone, then the other parts' margin
			// halfway between the copies'.
			rest := 0.0
			if n >= 1000 {
				rest = -(dot(l.w, x) + dot(l.ws, x)) / 2
			}
			copy(before, l.ws)
			if err := l.LearnSum(x, 1, rest+p.Score); err != nil {
				t.Fatal(err)
			}
			for i := range l.ws {
				worst = max(worst, math.Abs(l.ws[i]-before[i])/l.slowEta)
			}
		}
		if worst > 1+1e-12 {
			t.Errorf("%q: a slow step moved a coordinate by %.4g·slow·η", params, worst)
		}
		if worst < 0.5 {
			t.Errorf("%q: the slow copy hardly moved (%.4g·slow·η): the test checks nothing", params, worst)
		}
	}
}
