package learners

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// disjunctions is the seed-002 experiment stream of docs/spec/ALGORITHMS.md §7.3 with its
// bookkeeping: Z⁺ literal additions (counting the initial ones), Z⁻ removals
// and A attribute errors.
type disjunctions struct {
	stream
	zPlus, zMinus, attrErrors int
}

func disjunctionStream(seed uint64, n, T, period, k0 int, pAttr float64) disjunctions {
	r := rand.New(rand.NewPCG(seed, 7))
	perm := r.Perm(n)
	active, next := append([]int(nil), perm[:k0]...), k0
	out := disjunctions{zPlus: k0}
	removeNext := true
	for t := 0; t < T; t++ {
		if t > 0 && t%period == 0 {
			if removeNext && len(active) > 1 {
				k := r.IntN(len(active))
				active = append(active[:k], active[k+1:]...)
				out.zMinus++
			} else if next < n {
				active = append(active, perm[next])
				next++
				out.zPlus++
			}
			removeNext = !removeNext
		}
		isActive := map[int]bool{}
		for _, a := range active {
			isActive[a] = true
		}
		v := make([]float64, n)
		for i := range v {
			if !isActive[i] && r.IntN(2) == 1 {
				v[i] = 1
			}
		}
		y := 2*r.IntN(2) - 1
		if y == 1 {
			v[active[r.IntN(len(active))]] = 1
		}
		if r.Float64() < pAttr {
			out.attrErrors++
			if y == 1 {
				for _, a := range active {
					v[a] = 0
				}
			} else {
				v[active[r.IntN(len(active))]] = 1
			}
		}
		x, _ := NewDense(v)
		out.xs = append(out.xs, x)
		out.ys = append(out.ys, y)
	}
	return out
}

// §9.1: with unit inputs the Modified Perceptron keeps ‖w‖ = 1 (drift < 1e−9
// after 10⁴ updates without renormalization), and with noise-free labels an
// update never decreases the alignment w·u with the current target.
func TestModifiedPerceptronNormAndAlignment(t *testing.T) {
	s := unitStream(1, 40000, 10, 0)
	// Random labels force many updates for the norm claim.
	r := rand.New(rand.NewPCG(1, 1))
	noisy := stream{s.xs, make([]int, len(s.ys))}
	for i := range noisy.ys {
		noisy.ys[i] = 2*r.IntN(2) - 1
	}
	l := mustNew(t, "modified-perceptron", `{"renormalize_every":0}`, Config{Dim: 10}).(*modifiedPerceptron)
	rs := play(t, l, noisy)
	if n := countUpdates(rs); n < 10000 {
		t.Fatalf("only %d updates", n)
	}
	if drift := math.Abs(floats.Norm(l.w.dense(), 2) - 1); drift > 1e-9 {
		t.Fatalf("‖w‖ drifted by %g", drift)
	}

	// Alignment: noise-free labels from a drifting target.
	clean := gaussStream(3, 3000, 8, 300)
	u := make([]float64, 8)
	l2 := mustNew(t, "modified-perceptron", "", Config{Dim: 8}).(*modifiedPerceptron)
	rr := rand.New(rand.NewPCG(3, 1)) // replay gaussStream's target draws
	checked := 0
	for i, x := range clean.xs {
		if i%300 == 0 {
			for j := range u {
				u[j] = rr.NormFloat64()
			}
		}
		for j := 0; j < 8; j++ { // keep rr in step with gaussStream's input draws
			rr.NormFloat64()
		}
		p, _ := l2.Predict(x)
		before := floats.Dot(l2.w.dense(), u)
		l2.Learn(x, clean.ys[i], l2.Decide(p))
		if l2.started && p.stamp != l2.version && i > 0 && p.Score != 0 {
			checked++
			if after := floats.Dot(l2.w.dense(), u); after < before-1e-12 {
				t.Fatalf("round %d: w·u fell from %v to %v", i, before, after)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d updates checked", checked)
	}
}

// §9.2: the threshold tracker keeps τₜ ∈ Iₜ with no reset under γ-bounded drift
// and clean labels, |I| ≤ 1, an inside mistake halves I (+2γ), and the average
// error on uniform inputs stays under Theorem 5's bound.
func TestThresholdTrackerClaims(t *testing.T) {
	const gamma, T = 1e-3, 100000
	for seed := uint64(1); seed <= 3; seed++ {
		s, taus := lineStream(seed, T, gamma)
		l := mustNew(t, "threshold-tracker", fmt.Sprintf(`{"gamma":%v}`, gamma), Config{Dim: 1}).(*thresholdTracker)
		errs := 0
		for i, x := range s.xs {
			a, b, _ := l.interval()
			if taus[i] < a || taus[i] > b {
				t.Fatalf("seed %d round %d: τ = %v outside I = [%v, %v]", seed, i, taus[i], a, b)
			}
			p, _ := l.Predict(x)
			if p.Label != s.ys[i] {
				errs++
			}
			v := x.At(0)
			inside := v > a && v < b
			l.Learn(x, s.ys[i], l.Decide(p))
			na, nb, _ := l.interval()
			if nb-na > 1 || na < 0 || nb > 1 {
				t.Fatalf("I = [%v, %v]", na, nb)
			}
			if inside && p.Label != s.ys[i] && nb-na > (b-a)/2+2*gamma+1e-15 {
				t.Fatalf("inside mistake: |I| went from %v to %v", b-a, nb-na)
			}
		}
		if _, _, resets := l.interval(); resets != 0 {
			t.Fatalf("seed %d: %d resets", seed, resets)
		}
		bound := math.Sqrt(2*gamma/(T*gamma)) + math.Sqrt(5*gamma) // K = 0, λ = γ
		if avg := float64(errs) / T; avg > bound {
			t.Fatalf("seed %d: average error %v above Theorem 5's %v", seed, avg, bound)
		}
	}
}

// §9.3/§9.4: tracking Winnow's invariants (Lemmas 2–6) on every round and the
// exact Theorem 1 bound and Corollary 11 on shifting disjunctions with noise.
func TestTrackingWinnowInvariantsAndBounds(t *testing.T) {
	const n, T = 100, 10000
	lambda := float64(n) // ‖x‖₁ ≤ n always
	settings := []struct{ alpha, eps float64 }{
		{2, 1 / (50 * lambda)},
		{1.35, 1 / (35 * lambda)},
	}
	for _, st := range settings {
		for seed := uint64(1); seed <= 3; seed++ {
			ds := disjunctionStream(seed, n, T, 1000, 4, 0.01)
			l := mustNew(t, "tracking-winnow", fmt.Sprintf(`{"alpha":%v,"epsilon":%v,"lambda":%v}`, st.alpha, st.eps, lambda), Config{Dim: n}).(*trackingWinnow)
			el := st.eps * lambda
			M := 0
			for i, x := range ds.xs {
				p, _ := l.Predict(x)
				if p.Label != ds.ys[i] {
					M++
				}
				before := floats.Sum(l.w)
				pr, de := l.promotions, l.demotions
				l.Learn(x, ds.ys[i], l.Decide(p))
				change := floats.Sum(l.w) - before
				switch {
				case l.promotions > pr && !(change < st.alpha-1):
					t.Fatalf("round %d: promotion raised Σw by %v ≥ α−1", i, change)
				case l.demotions > de && !(-change > (st.alpha-1)*(1-el)/st.alpha):
					t.Fatalf("round %d: demotion lowered Σw by only %v", i, -change)
				}
				if l.promotions == 0 && l.demotions != 0 {
					t.Fatal("demotion before any promotion")
				}
				if l.promotions > 0 && !(float64(l.demotions) < st.alpha*float64(l.promotions)/(1-el)) {
					t.Fatalf("D = %d, P = %d violate Lemma 5", l.demotions, l.promotions)
				}
				for j, w := range l.w {
					if w < st.eps || w > math.Max(st.eps, st.alpha) {
						t.Fatalf("round %d: w[%d] = %v outside [ε, max(ε, α)]", i, j, w)
					}
				}
			}
			// Theorem 1 exact form, disjunction bookkeeping: δ = 1, H = 2Z⁺, ζ = 1, N = 2A.
			H, N := 2*float64(ds.zPlus), 2*float64(ds.attrErrors)
			lnA := math.Log(st.alpha)
			exact := (1 - el + st.alpha) / (2 * (1 - el)) * (H*(lnA+math.Log(1/st.eps))/lnA + N)
			if float64(M) >= exact {
				t.Errorf("α=%v seed %d: %d mistakes ≥ Theorem 1 bound %.1f", st.alpha, seed, M, exact)
			}
			if st.alpha == 2 {
				cor11 := 6.1*float64(ds.zPlus)*(math.Log(lambda)+4.92) + 1.53*N
				if float64(M) >= cor11 {
					t.Errorf("seed %d: %d mistakes ≥ Corollary 11 bound %.1f", seed, M, cor11)
				}
			}
			if M < 50 {
				t.Errorf("only %d mistakes: the stream does not exercise the learner", M)
			}
			t.Logf("α=%v seed %d: M = %d, Theorem 1 bound %.1f (Z⁺=%d, A=%d)", st.alpha, seed, M, exact, ds.zPlus, ds.attrErrors)
		}
	}
}

// §9.5: Shifting Winnow's weights stay in [β/n, max(w₀, α)], the deterministic
// version updates only on mistakes, and both versions stay under the §4.3
// bounds B/c_det and B/c_rand.
func TestSwinInvariantsAndBounds(t *testing.T) {
	const n, T = 100, 10000
	alpha, beta := 1.32, 0.0269
	cdet := (math.Log(alpha) - beta*(alpha-1)) / (alpha + 1)
	crand := (math.Log(alpha) - beta*(alpha-1)) / alpha
	for _, randomized := range []bool{false, true} {
		for seed := uint64(1); seed <= 3; seed++ {
			ds := disjunctionStream(seed, n, T, 1000, 4, 0.002)
			l := mustNew(t, "swin", fmt.Sprintf(`{"randomized":%v}`, randomized), Config{Dim: n, Seed: seed}).(*swin)
			M, expected := 0, 0.0
			for i, x := range ds.xs {
				p, _ := l.Predict(x)
				expected += p.ExpectedMistake(ds.ys[i])
				p = l.Decide(p)
				mistake := p.Label != ds.ys[i]
				if mistake {
					M++
				}
				v := l.version
				l.Learn(x, ds.ys[i], p)
				if !randomized && (l.version != v) != mistake {
					t.Fatalf("round %d: deterministic update %v on mistake %v", i, l.version != v, mistake)
				}
				for j, w := range l.w {
					if w < beta/n || w > math.Max(beta/n, alpha) {
						t.Fatalf("round %d: w[%d] = %v outside [β/n, max(w₀, α)]", i, j, w)
					}
				}
			}
			B := beta + float64(ds.zPlus)*(math.Log(n/beta)-1) + float64(ds.zMinus)*(1+math.Log(alpha)) + float64(ds.attrErrors)*math.Log(alpha)
			if !randomized && float64(M) > B/cdet {
				t.Errorf("seed %d: deterministic M = %d > B/c_det = %.1f", seed, M, B/cdet)
			}
			if randomized && expected > B/crand {
				t.Errorf("seed %d: randomized E[M] = %.1f > B/c_rand = %.1f", seed, expected, B/crand)
			}
			t.Logf("randomized=%v seed %d: M = %d, E[M] = %.1f, bounds det %.1f rand %.1f", randomized, seed, M, expected, B/cdet, B/crand)
		}
	}
}

// §9.15: on the §7.3 stream, randomized SWIN's expected mistakes are at most
// 0.67× those of the no-floor version (β = 0, w₀ = 4/n), which in turn does
// better on the first concept.
func TestSwinFloorBeatsNoFloorAfterShifts(t *testing.T) {
	const n, T = 100, 10000
	for seed := uint64(1); seed <= 3; seed++ {
		ds := disjunctionStream(seed, n, T, 1000, 4, 0)
		run := func(params string) (total, first float64) {
			l := mustNew(t, "swin", params, Config{Dim: n, Seed: seed})
			for i, x := range ds.xs {
				p, _ := l.Predict(x)
				e := p.ExpectedMistake(ds.ys[i])
				total += e
				if i < 1000 {
					first += e
				}
				l.Learn(x, ds.ys[i], l.Decide(p))
			}
			return total, first
		}
		swinTotal, swinFirst := run(`{"randomized":true}`)
		plainTotal, plainFirst := run(fmt.Sprintf(`{"randomized":true,"beta":0,"w0":%v}`, 4.0/n))
		t.Logf("seed %d: SWIN %.0f (first period %.0f), β=0 %.0f (first period %.0f)", seed, swinTotal, swinFirst, plainTotal, plainFirst)
		if swinTotal > 0.67*plainTotal {
			t.Errorf("seed %d: SWIN %.1f > 0.67 × no-floor %.1f", seed, swinTotal, plainTotal)
		}
		if plainFirst >= swinFirst {
			t.Errorf("seed %d: no-floor first period %.1f not below SWIN's %.1f", seed, plainFirst, swinFirst)
		}
	}
}

// §9.6: weighted majority makes at most (ln J + mⱼ ln(1/β))/ln(2/(1+β))
// mistakes for every member j.
func TestWeightedMajorityBound(t *testing.T) {
	members := `[{"name":"swin"},{"name":"tracking-winnow","params":{"delta":1}},{"name":"winnow2","params":{"theta":5}},{"name":"swin","params":{"alpha":2,"beta":0.05}}]`
	for _, beta := range []float64{0.5, 0.8} {
		ds := disjunctionStream(5, 60, 6000, 1000, 3, 0.01)
		l := mustNew(t, "weighted-majority", fmt.Sprintf(`{"beta":%v,"members":%s}`, beta, members), Config{Dim: 60}).(*weightedMajority)
		J := len(l.members)
		memberMistakes := make([]int, J)
		M := 0
		for i, x := range ds.xs {
			p, _ := l.Predict(x)
			p = l.Decide(p)
			if p.Label != ds.ys[i] {
				M++
			}
			for j, mp := range p.members {
				if mp.Label != ds.ys[i] {
					memberMistakes[j]++
				}
			}
			l.Learn(x, ds.ys[i], p)
		}
		for j, mj := range memberMistakes {
			bound := (math.Log(float64(J)) + float64(mj)*math.Log(1/beta)) / math.Log(2/(1+beta))
			if float64(M) > bound {
				t.Errorf("β=%v: M = %d > bound %.1f for member %d (%d mistakes)", beta, M, bound, j, mj)
			}
		}
		t.Logf("β=%v: master %d, members %v", beta, M, memberMistakes)
	}
}

// §9.7: LASEC's covariance stays well conditioned: after each update
// λ_min(P) ≥ 1/(c + ‖x‖²) and λ_max(P) ≤ 1/b + (k−1)/c.
func TestLASECConditioning(t *testing.T) {
	const d, b, c = 5, 1.0, 20.0
	s := gaussStream(7, 4000, d, 100)
	l := mustNew(t, "lasec", fmt.Sprintf(`{"b":%v,"c":%v}`, b, c), Config{Dim: d}).(*secondOrder)
	checked := 0
	for i, x := range s.xs {
		p, _ := l.Predict(x)
		k := l.r.k
		l.Learn(x, s.ys[i], l.Decide(p))
		if l.r.k == k {
			continue
		}
		checked++
		var eig mat.EigenSym
		if !eig.Factorize(mat.NewSymDense(d, l.r.full()), false) {
			t.Fatal("eigendecomposition failed")
		}
		vals := eig.Values(nil)
		lo, hi := floats.Min(vals), floats.Max(vals)
		if lo < 1/(c+x.SquaredNorm())-1e-12 {
			t.Fatalf("update %d: λ_min = %v < 1/(c+‖x‖²) = %v", l.r.k, lo, 1/(c+x.SquaredNorm()))
		}
		if hi > 1/b+float64(l.r.k-1)/c+1e-12 {
			t.Fatalf("update %d: λ_max = %v > %v", l.r.k, hi, 1/b+float64(l.r.k-1)/c)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d updates", checked)
	}
}

// §9.8: a selective sampler's query count matches Σ s/(s + |p̂ₜ|) within
// binomial error.
func TestSamplerQueryCountMatchesExpectation(t *testing.T) {
	tests := []struct{ name, params string }{
		{"perceptron-ss", `{"b":10}`},
		{"sop-ss", `{"b":0.03}`},
		{"lasec-ss", `{"a":0.003,"c":10}`},
		{"lasec-ss", `{"a":0.01,"diagonal":true}`},
	}
	for _, tc := range tests {
		t.Run(tc.name+tc.params, func(t *testing.T) {
			s := gaussStream(2, 5000, 20, 500)
			rs := play(t, mustNew(t, tc.name, tc.params, Config{Dim: 20, Seed: 8}), s)
			var q, sum, v float64
			for _, r := range rs {
				if r.query {
					q++
				}
				sum += r.qprob
				v += r.qprob * (1 - r.qprob)
			}
			if math.Abs(q-sum) > 4*math.Sqrt(v) {
				t.Fatalf("%v queries, expected %.1f ± %.1f", q, sum, math.Sqrt(v))
			}
			if rate := q / float64(len(rs)); rate < 0.02 || rate > 0.98 {
				t.Fatalf("query rate %v: the test is vacuous", rate)
			}
		})
	}
}

// §9.9: the ODM gradient matches finite differences, the corrected step
// decreases fₜ for small η, and the seed's printed sign would increase it.
func TestODMGradientAndStepDirection(t *testing.T) {
	o := odmLoss{lambda: 1.3, mu: 0.5, theta: 0.3}
	r := rand.New(rand.NewPCG(1, 1))
	checked := 0
	for trial := 0; trial < 200; trial++ {
		d := 4
		w := make([]float64, d)
		xv := make([]float64, d)
		for i := range w {
			w[i], xv[i] = r.NormFloat64(), r.NormFloat64()
		}
		y := 2*r.IntN(2) - 1
		f := func(w []float64) float64 {
			return floats.Dot(w, w)/2 + o.lambda*o.loss(float64(y)*floats.Dot(w, xv))
		}
		g := o.grad(float64(y) * floats.Dot(w, xv))
		grad := make([]float64, d) // ∇f = w + λ g y x
		for i := range grad {
			grad[i] = w[i] + o.lambda*g*float64(y)*xv[i]
		}
		for i := range w {
			h := 1e-6
			wp, wm := append([]float64(nil), w...), append([]float64(nil), w...)
			wp[i] += h
			wm[i] -= h
			if fd := (f(wp) - f(wm)) / (2 * h); math.Abs(fd-grad[i]) > 1e-6*math.Max(1, math.Abs(fd)) {
				t.Fatalf("∂f/∂w%d = %v, finite difference %v", i, grad[i], fd)
			}
		}
		const eta = 1e-4
		descent, seed := make([]float64, d), make([]float64, d)
		for i := range w {
			descent[i] = (1-eta)*w[i] - eta*o.lambda*g*float64(y)*xv[i]
			seed[i] = (1-eta)*w[i] + eta*o.lambda*g*float64(y)*xv[i]
		}
		if g != 0 { // outside the insensitive zone the two rules differ
			checked++
			if !(f(descent) < f(w)) {
				t.Fatalf("descent step did not decrease f")
			}
			if o.lambda*g*g*floats.Dot(xv, xv) > 2*floats.Dot(w, w) && !(f(seed) > f(descent)) {
				t.Fatalf("the seed's sign is not worse")
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d informative trials", checked)
	}
	// And the learner itself takes the descent step.
	l := mustNew(t, "odm", `{"schedule":"constant","eta":0.0001}`, Config{Dim: 2}).(*odm)
	x := mustDense(t, []float64{1, 2})
	l.c.w.add(1, mustDense(t, []float64{0.1, -0.3}))
	before := l.c.objective(1, l.c.w.dot(x))
	p, _ := l.Predict(x)
	l.Learn(x, 1, p)
	if after := l.c.objective(1, l.c.w.dot(x)); !(after < before) {
		t.Fatalf("odm step raised fₜ from %v to %v", before, after)
	}
}

// §9.4 (seed 004 §5): SOP with a large ridge has the Perceptron's signs, and
// LASEC beats both on the switching stream (§10.2 ballpark, 3 runs).
func TestLASECAdaptsToSwitches(t *testing.T) {
	acc := map[string]float64{}
	for seed := uint64(1); seed <= 3; seed++ {
		s := gaussStream(seed, 6000, 50, 500)
		for _, c := range []struct{ name, params string }{{"perceptron", ""}, {"sop", ""}, {"lasec", `{"c":100}`}} {
			rs := play(t, mustNew(t, c.name, c.params, Config{Dim: 50}), s)
			acc[c.name] += (1 - float64(mistakes(rs, s))/float64(len(rs))) / 3
		}
	}
	t.Logf("accuracy over 3 runs: %v", acc)
	if !(acc["lasec"] > acc["perceptron"] && acc["lasec"] > acc["sop"]) {
		t.Fatalf("LASEC not best under switching drift: %v", acc)
	}
}
