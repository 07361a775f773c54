package learners

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// docs/spec/ALGORITHMS.md §8: pairs of configurations that must make identical predictions
// and identical update rounds on the same stream (and RNG stream).
func TestEquivalentConfigurations(t *testing.T) {
	g := func(seed uint64) stream { return gaussStream(seed, 1500, 6, 250) }
	sp := func(seed uint64) stream { return sparseStream(seed, 1500, 30, 3, 250) }
	bo := func(seed uint64) stream { return boolStream(seed, 3000, 30, 3, 500, 0.03) }
	oneHot := func(seed uint64) stream { return sparseStream(seed, 1500, 10, 1, 250) }
	tests := []struct {
		name         string
		a, aParams   string
		b, bParams   string
		dim          int
		stream       func(uint64) stream
		minUpdates   int     // guards against a vacuous comparison
		maxFlipShare float64 // allowed share of differing labels (floating-point ties)
		labelsOnly   bool    // a learns every round by design; compare predictions only
	}{
		{"§8.1 shifting(λ→0) ≡ perceptron", "shifting-perceptron", `{"lambda":1e-12}`, "perceptron", "", 6, g, 50, 0, false},
		{"§8.2 budget(B ≥ updates) ≡ perceptron", "budget-perceptron", `{"budget":100000}`, "perceptron", "", 6, g, 50, 0, false},
		{"§8.4 sop(a→∞) ≡ perceptron", "sop", `{"a":1e10}`, "perceptron", "", 6, g, 50, 0, false},
		{"§8.6 lasec(c=∞) ≡ sop(a=b)", "lasec", `{"b":2.5,"c":"inf"}`, "sop", `{"a":2.5}`, 6, g, 50, 0, false},
		{"§8.6 lasec(c=∞) ≡ sop, sparse", "lasec", `{"b":1,"c":"inf"}`, "sop", `{"a":1}`, 30, sp, 50, 0, false},
		{"§8.9 lasec-ss(a=∞) ≡ lasec", "lasec-ss", `{"a":"inf","c":30}`, "lasec", `{"c":30}`, 6, g, 50, 0, false},
		{"§8.9 lasec-ss(c=∞) ≡ sop-ss, same RNG", "lasec-ss", `{"b":2,"c":"inf","a":0.01}`, "sop-ss", `{"a":2,"b":0.01}`, 6, g, 20, 0, false},
		{"§8.9 lasec-ss(c=∞,a=∞) ≡ sop", "lasec-ss", `{"c":"inf","a":"inf"}`, "sop", "", 6, g, 50, 0, false},
		{"§8.9 perceptron-ss(b=∞) ≡ perceptron", "perceptron-ss", `{"b":"inf"}`, "perceptron", "", 6, g, 50, 0, false},
		{"§8.9 sop-ss(b=∞) ≡ sop", "sop-ss", `{"b":"inf","a":3}`, "sop", `{"a":3}`, 6, g, 50, 0, false},
		{"§8.10 diagonal lasec ≡ lasec on one-hot inputs", "lasec", `{"diagonal":true,"c":7}`, "lasec", `{"c":7}`, 10, oneHot, 20, 0, false},
		{"§8.10 diagonal sop ≡ sop on one-hot inputs", "sop", `{"diagonal":true}`, "sop", "", 10, oneHot, 20, 0, false},
		{"§8.11 bbq-i forced on ≡ sop", "bbq-i", `{"rho":0,"a":2}`, "sop", `{"a":2}`, 6, g, 50, 0, false},
		{"§8.13 winnow2(α,θ,w₀) ≡ winnow2(α,1,w₀/θ)", "winnow2", `{"alpha":1.7,"theta":4,"w0":0.5}`, "winnow2", `{"alpha":1.7,"theta":1,"w0":0.125}`, 30, bo, 50, 0.002, false},
		{"§8.14 tracking-winnow(ε→0, w₀) ≡ winnow2(θ=1)", "tracking-winnow", `{"alpha":1.5,"epsilon":1e-300,"w_init":0.05}`, "winnow2", `{"alpha":1.5,"theta":1,"w0":0.05}`, 30, bo, 50, 0, false},
		{"§8.15 swin det β=0 ≡ winnow2(θ = α ln α/(α²−1))", "swin", `{"alpha":1.32,"beta":0,"w0":0.04}`, "winnow2",
			fmt.Sprintf(`{"alpha":1.32,"theta":%v,"w0":0.04}`, 1.32*math.Log(1.32)/(1.32*1.32-1)), 30, bo, 50, 0, false},
		{"§8.16 swin det w₀=β/n ≡ tracking-winnow(ε = β/(nθ_det))", "swin", "", "tracking-winnow",
			fmt.Sprintf(`{"alpha":1.32,"epsilon":%v}`, 0.0269/(30*SwinThetaDet(1.32, 0.0269))), 30, bo, 50, 0.01, false},
		{"§8.18 weighted-majority with one member ≡ the member", "weighted-majority", `{"members":[{"name":"lasec","params":{"c":10}}]}`, "lasec", `{"c":10}`, 6, g, 50, 0, true},
		{"§8.19 dynamic-odm(N=1, Δ ≥ T, zero init) ≡ odm", "dynamic-odm", `{"periods":[1000000],"init":"zero"}`, "odm", "", 6, g, 1000, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				s := tc.stream(seed)
				cfg := Config{Dim: tc.dim, Seed: seed, Key: "same"}
				a := play(t, mustNew(t, tc.a, tc.aParams, cfg), s)
				b := play(t, mustNew(t, tc.b, tc.bParams, cfg), s)
				if tc.labelsOnly {
					for i := range a {
						if a[i].label != b[i].label || a[i].query != b[i].query {
							t.Fatalf("round %d differs: %+v vs %+v", i, a[i], b[i])
						}
					}
				} else if tc.maxFlipShare == 0 {
					sameRounds(t, tc.name, a, b)
				} else {
					diff := 0
					for i := range a {
						if a[i].label != b[i].label {
							diff++
						}
					}
					if share := float64(diff) / float64(len(a)); share > tc.maxFlipShare {
						t.Fatalf("%d of %d labels differ", diff, len(a))
					}
				}
				if n := countUpdates(b); n < tc.minUpdates {
					t.Fatalf("only %d updates: the comparison is too weak", n)
				}
			}
		})
	}
}

// §8.1: the first Shifting Perceptron update sets w = y·x whatever λ is.
func TestShiftingFirstUpdateIsYX(t *testing.T) {
	for _, lambda := range []float64{1e-4, 0.01, 0.7, 5} {
		l := mustNew(t, "shifting-perceptron", fmt.Sprintf(`{"lambda":%v}`, lambda), Config{Dim: 3}).(*shiftingPerceptron)
		x := mustDense(t, []float64{0.5, -2, 3})
		p, _ := l.Predict(x)
		if err := l.Learn(x, -1, p); err != nil {
			t.Fatal(err)
		}
		if w := l.w.dense(); !floats.Equal(w, []float64{-0.5, 2, -3}) {
			t.Errorf("λ=%v: w = %v", lambda, w)
		}
	}
}

// §2.3 closed form: w = Σⱼ yⱼxⱼ·Πᵢ₌ⱼ₊₁^{K−1}(1 − λᵢ) over the update rounds.
func TestShiftingClosedForm(t *testing.T) {
	const lambda = 0.3
	s := gaussStream(9, 400, 5, 80)
	l := mustNew(t, "shifting-perceptron", fmt.Sprintf(`{"lambda":%v}`, lambda), Config{Dim: 5}).(*shiftingPerceptron)
	rs := play(t, l, s)
	var upd []int
	for i, r := range rs {
		if r.updated {
			upd = append(upd, i)
		}
	}
	want := make([]float64, 5)
	K := len(upd)
	for j, t0 := range upd {
		f := 1.0
		for i := j + 1; i < K; i++ {
			f *= float64(i) / (lambda + float64(i))
		}
		axpy(want, f*float64(s.ys[t0]), s.xs[t0])
	}
	if got := l.w.dense(); !floats.EqualApprox(got, want, 1e-9) {
		t.Fatalf("w = %v, closed form %v", got, want)
	}
}

// §8.2: with a small budget RBP equals the Perceptron up to the (B+1)-th update,
// and w = Σ_S y·x with |S| ≤ B always.
func TestBudgetPerceptronInvariants(t *testing.T) {
	for _, amongAll := range []bool{false, true} {
		const B = 10
		s := gaussStream(4, 2000, 6, 300)
		l := mustNew(t, "budget-perceptron", fmt.Sprintf(`{"budget":%d,"evict_among_all":%v,"recompute_every":0}`, B, amongAll), Config{Dim: 6, Seed: 3}).(*budgetPerceptron)
		ref := mustNew(t, "perceptron", "", Config{Dim: 6})
		diverged := false
		for i, x := range s.xs {
			p, _ := l.Predict(x)
			q, _ := ref.Predict(x)
			if len(l.xs) < B && !diverged && p.Label != q.Label {
				t.Fatalf("round %d: differs from the Perceptron before the budget filled", i)
			}
			if len(l.xs) == B {
				diverged = true
			}
			if err := l.Learn(x, s.ys[i], l.Decide(p)); err != nil {
				t.Fatal(err)
			}
			ref.Learn(x, s.ys[i], ref.Decide(q))
			if len(l.xs) > B {
				t.Fatalf("store holds %d > B", len(l.xs))
			}
			sum := make([]float64, 6)
			for k, sx := range l.xs {
				axpy(sum, float64(l.ys[k]), sx)
			}
			if !floats.EqualApprox(sum, l.w, 1e-9) {
				t.Fatalf("round %d: w = %v but Σ_S y·x = %v", i, l.w, sum)
			}
		}
		if l.evictions == 0 {
			t.Fatal("budget never filled: the test is vacuous")
		}
	}
}

// §8.3: the Modified Perceptron update is a reflection.
func TestModifiedPerceptronReflection(t *testing.T) {
	s := gaussStream(2, 500, 7, 100)
	l := mustNew(t, "modified-perceptron", `{"renormalize_every":0}`, Config{Dim: 7}).(*modifiedPerceptron)
	reflections := 0
	for i, x := range s.xs {
		p, _ := l.Predict(x)
		before := l.w.dense()
		if err := l.Learn(x, s.ys[i], l.Decide(p)); err != nil {
			t.Fatal(err)
		}
		if !l.started || i == 0 || p.stamp == l.version {
			continue
		}
		reflections++
		after := l.w.dense()
		xh := x.Scale(1 / math.Sqrt(x.SquaredNorm()))
		if d := math.Abs(floats.Norm(after, 2) - floats.Norm(before, 2)); d > 1e-12 {
			t.Fatalf("round %d: norm changed by %g", i, d)
		}
		if d := math.Abs(dot(after, xh) + dot(before, xh)); d > 1e-12 {
			t.Fatalf("round %d: w_new·x̂ = %g, −w·x̂ = %g", i, dot(after, xh), -dot(before, xh))
		}
	}
	if reflections < 50 {
		t.Fatalf("only %d reflections", reflections)
	}
}

// explicitSOPMargin is sgn's argument in SOP's definition: vᵀ(aI + XXᵀ + xxᵀ)⁻¹x.
func explicitSOPMargin(a float64, upd []Vector, ys []int, x Vector) float64 {
	d := x.Dim()
	A := mat.NewSymDense(d, nil)
	for i := 0; i < d; i++ {
		A.SetSym(i, i, a)
	}
	v := make([]float64, d)
	for k, u := range append(upd, x) {
		ud := u.Dense()
		A.SymRankOne(A, 1, mat.NewVecDense(d, ud))
		if k < len(upd) {
			floats.AddScaled(v, float64(ys[k]), ud)
		}
	}
	var sol mat.VecDense
	if err := sol.SolveVec(A, mat.NewVecDense(d, x.Dense())); err != nil {
		panic(err)
	}
	return floats.Dot(v, sol.RawVector().Data)
}

// §8.5: SOP's covariance form equals the explicit definition (margins 1e−9),
// here through sop-ss, whose score is the full p̂.
func TestSOPCovarianceFormMatchesExplicit(t *testing.T) {
	s := gaussStream(6, 300, 5, 0)
	l := mustNew(t, "sop-ss", `{"a":1.5,"b":"inf"}`, Config{Dim: 5})
	var upd []Vector
	var ys []int
	for i, x := range s.xs {
		p, _ := l.Predict(x)
		if want := explicitSOPMargin(1.5, upd, ys, x); math.Abs(p.Score-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Fatalf("round %d: p̂ = %.15g, explicit %.15g", i, p.Score, want)
		}
		if float64(s.ys[i])*p.Score <= 0 {
			upd, ys = append(upd, x), append(ys, s.ys[i])
		}
		l.Learn(x, s.ys[i], l.Decide(p))
	}
	if len(upd) < 10 {
		t.Fatalf("only %d updates", len(upd))
	}
}

// literalLASEC is seed 004's Fig. 1 taken literally, with explicit inverses.
type literalLASEC struct {
	b, c float64 // c = +Inf allowed
	D    *mat.Dense
	e    *mat.VecDense
	d    int
}

func newLiteralLASEC(d int, b, c float64) *literalLASEC {
	D := mat.NewDense(d, d, nil)
	d0 := b * c / (c - b)
	if math.IsInf(c, 1) {
		d0 = b
	}
	for i := 0; i < d; i++ {
		D.Set(i, i, d0)
	}
	return &literalLASEC{b: b, c: c, D: D, e: mat.NewVecDense(d, nil), d: d}
}

// margin returns p̂ and the pieces needed for the update.
func (l *literalLASEC) margin(x []float64) (float64, *mat.Dense, *mat.VecDense) {
	d := l.d
	invC := 1 / l.c
	var Dinv mat.Dense
	if err := Dinv.Inverse(l.D); err != nil {
		panic(err)
	}
	M := mat.NewDense(d, d, nil) // (D⁻¹ + I/c)⁻¹
	M.Copy(&Dinv)
	for i := 0; i < d; i++ {
		M.Set(i, i, M.At(i, i)+invC)
	}
	if err := M.Inverse(M); err != nil {
		panic(err)
	}
	xv := mat.NewVecDense(d, x)
	S := mat.NewDense(d, d, nil)
	S.Outer(1, xv, xv)
	S.Add(S, M)
	G := mat.NewDense(d, d, nil) // (I + D/c)⁻¹
	G.Scale(invC, l.D)
	for i := 0; i < d; i++ {
		G.Set(i, i, G.At(i, i)+1)
	}
	if err := G.Inverse(G); err != nil {
		panic(err)
	}
	var et, z mat.VecDense
	et.MulVec(G, l.e)
	if err := z.SolveVec(S, xv); err != nil {
		panic(err)
	}
	return mat.Dot(&z, &et), S, &et
}

func (l *literalLASEC) update(x []float64, y int, S *mat.Dense, et *mat.VecDense) {
	et.AddScaledVec(et, float64(y), mat.NewVecDense(l.d, x))
	l.e = et
	l.D = mat.DenseCopyOf(S)
}

// §8.7/§8.8: the O(d²) covariance form equals the literal Fig. 1 recursion.
func TestLASECMatchesLiteralForm(t *testing.T) {
	for _, c := range []float64{5, 50, math.Inf(1)} {
		t.Run(fmt.Sprint("c=", c), func(t *testing.T) {
			cs := fmt.Sprint(c)
			if math.IsInf(c, 1) {
				cs = `"inf"`
			}
			s := gaussStream(12, 400, 6, 100)
			fast := mustNew(t, "lasec-ss", fmt.Sprintf(`{"b":1,"c":%s,"a":"inf"}`, cs), Config{Dim: 6}).(*secondOrder)
			lit := newLiteralLASEC(6, 1, c)
			updates := 0
			for i, x := range s.xs {
				p, _ := fast.Predict(x)
				want, S, et := lit.margin(x.Dense())
				if math.Abs(p.Score-want) > 1e-10*math.Max(1, math.Abs(want)) {
					t.Fatalf("round %d: p̂ = %.17g, literal %.17g", i, p.Score, want)
				}
				// §8.8: p̂ = (w·x)/(1 + xᵀPx + ‖x‖²/c) from the stored P and w.
				r := &fast.r
				xPx := 0.0
				for a := 0; a < 6; a++ {
					for b := 0; b < 6; b++ {
						xPx += x.At(a) * r.at(a, b) * x.At(b)
					}
				}
				if f := dot(r.w, x) / (1 + xPx + x.SquaredNorm()/c); math.Abs(f-p.Score) > 1e-12*math.Max(1, math.Abs(f)) {
					t.Fatalf("round %d: §8.8 formula %.17g vs %.17g", i, f, p.Score)
				}
				if float64(s.ys[i])*want <= 0 {
					lit.update(x.Dense(), s.ys[i], S, et)
					updates++
				}
				fast.Learn(x, s.ys[i], fast.Decide(p))
			}
			if updates < 50 {
				t.Fatalf("only %d updates", updates)
			}
		})
	}
}

// fullRLS is the full form as it was before the packed storage: P row-major
// d×d, both triangles updated from the same product. The packed form must
// reproduce it bit for bit.
type fullRLS struct {
	d    int
	invC float64
	w, p []float64
}

func newFullRLS(d int, ridge, invC float64) *fullRLS {
	r := &fullRLS{d: d, invC: invC, w: make([]float64, d), p: make([]float64, d*d)}
	for i := 0; i < d; i++ {
		r.p[i*d+i] = 1/ridge - invC
	}
	return r
}

func (r *fullRLS) quad(x Vector) float64 {
	s, d := 0.0, r.d
	if x.idx == nil {
		for i, xi := range x.val {
			if xi != 0 {
				s += xi * floats.Dot(r.p[i*d:(i+1)*d], x.val)
			}
		}
	} else {
		for a, i := range x.idx {
			row := r.p[int(i)*d:]
			t := 0.0
			for b, j := range x.idx {
				t += row[j] * x.val[b]
			}
			s += x.val[a] * t
		}
	}
	return s + r.invC*x.SquaredNorm()
}

func (r *fullRLS) update(x Vector, y int) {
	d := r.d
	wx := dot(r.w, x)
	q := make([]float64, d)
	if x.idx == nil {
		for i := 0; i < d; i++ {
			q[i] = floats.Dot(r.p[i*d:(i+1)*d], x.val)
		}
	} else {
		for k, i := range x.idx {
			floats.AddScaled(q, x.val[k], r.p[int(i)*d:(int(i)+1)*d])
		}
	}
	if r.invC != 0 {
		axpy(q, r.invC, x)
	}
	s := dot(q, x)
	floats.AddScaled(r.w, (float64(y)-wx)/(1+s), q)
	inv := 1 / (1 + s)
	for i := 0; i < d; i++ {
		qi := q[i]
		row := r.p[i*d : (i+1)*d]
		row[i] += r.invC - qi*qi*inv
		for j := i + 1; j < d; j++ {
			t := qi * q[j] * inv
			row[j] -= t
			r.p[j*d+i] -= t
		}
	}
}

// The packed covariance is the full one, bit for bit: every entry, the
// weights, and every quadratic form, over dense and sparse streams, with and
// without drift.
func TestPackedCovarianceIsTheFullForm(t *testing.T) {
	cases := []struct {
		name string
		s    stream
		d    int
		invC float64
	}{
		{"sparse-drift", sparseStream(3, 2000, 12, 5, 300), 12, 0.1},
		{"dense", gaussStream(4, 1500, 7, 200), 7, 0},
		{"dense-drift", gaussStream(5, 1500, 9, 200), 9, 0.05},
	}
	// Every remainder of d mod 4 and rows longer than one block of four, so
	// that each part of the products (packed_amd64.s: the head, the four-wide
	// middle and the tail of a row) is exercised.
	for _, d := range []int{1, 2, 3, 4, 5, 6, 8, 13, 50, 51} {
		cases = append(cases, struct {
			name string
			s    stream
			d    int
			invC float64
		}{fmt.Sprintf("dense-drift-d%d", d), gaussStream(uint64(10+d), 300, d, 100), d, 0.05})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			packed, full := newRLS(tc.d, 1, tc.invC, false), newFullRLS(tc.d, 1, tc.invC)
			for n, x := range tc.s.xs {
				if a, b := packed.quad(x), full.quad(x); math.Float64bits(a) != math.Float64bits(b) {
					t.Fatalf("round %d: xᵀPx %v, full form %v", n, a, b)
				}
				packed.update(x, tc.s.ys[n])
				full.update(x, tc.s.ys[n])
				if !slices.Equal(packed.w, full.w) || !slices.Equal(packed.full(), full.p) {
					t.Fatalf("round %d: the packed state left the full form", n)
				}
			}
		})
	}
}

// §8.11/§8.12: BBQ forced on is ridge regression on all data, and its query
// statistic r = xᵀ(A + xxᵀ)⁻¹x lies in [0,1).
func TestBBQForcedOnIsRidgeRegression(t *testing.T) {
	const a, d = 2.0, 5
	s := gaussStream(5, 200, d, 50)
	l := mustNew(t, "bbq", fmt.Sprintf(`{"rho":0,"a":%v}`, a), Config{Dim: d}).(*bbq)
	A := mat.NewSymDense(d, nil)
	for i := 0; i < d; i++ {
		A.SetSym(i, i, a)
	}
	bvec := make([]float64, d)
	for i, x := range s.xs {
		p, _ := l.Predict(x)
		// r from the learner's own quadratic form vs the explicit definition.
		v := l.r.quad(x)
		r := v / (1 + v)
		Ax := mat.NewSymDense(d, nil)
		Ax.CopySym(A)
		Ax.SymRankOne(Ax, 1, mat.NewVecDense(d, x.Dense()))
		var z mat.VecDense
		z.SolveVec(Ax, mat.NewVecDense(d, x.Dense()))
		want := floats.Dot(x.Dense(), z.RawVector().Data)
		if math.Abs(r-want) > 1e-10 || r < 0 || r >= 1 {
			t.Fatalf("round %d: r = %v, explicit %v", i, r, want)
		}
		p = l.Decide(p)
		if !p.Query {
			t.Fatalf("round %d: ρ = 0 must query", i)
		}
		l.Learn(x, s.ys[i], p)
		A.SymRankOne(A, 1, mat.NewVecDense(d, x.Dense()))
		floats.AddScaled(bvec, float64(s.ys[i]), x.Dense())
		var w mat.VecDense
		w.SolveVec(A, mat.NewVecDense(d, bvec))
		if !floats.EqualApprox(l.r.w, w.RawVector().Data, 1e-9) {
			t.Fatalf("round %d: w = %v, ridge %v", i, l.r.w, w.RawVector().Data)
		}
	}
}

// §5.4: with κ = 0 the threshold is ρ = 1 and r < 1, so BBQ never queries;
// at t = 1 nothing is queried for any κ.
func TestBBQThresholdEdges(t *testing.T) {
	s := gaussStream(1, 100, 4, 0)
	l := mustNew(t, "bbq", `{"kappa":0}`, Config{Dim: 4})
	for _, r := range play(t, l, s) {
		if r.query {
			t.Fatal("κ = 0 queried")
		}
	}
	for _, kappa := range []float64{0.1, 0.5, 1} {
		l := mustNew(t, "bbq", fmt.Sprintf(`{"kappa":%v}`, kappa), Config{Dim: 4})
		if rs := play(t, l, stream{s.xs[:1], s.ys[:1]}); rs[0].query {
			t.Fatalf("κ = %v queried at t = 1", kappa)
		}
	}
}

// §8.17: Shifting Winnow's constants.
func TestSwinConstants(t *testing.T) {
	for _, ab := range [][2]float64{{1.32, 0.0269}, {2, 0.1}, {1.1, 0}} {
		alpha, beta := ab[0], ab[1]
		l := mustNew(t, "swin", fmt.Sprintf(`{"alpha":%v,"beta":%v,"randomized":true,"w0":0.5}`, alpha, beta), Config{Dim: 10}).(*swin)
		th := SwinThetaDet(alpha, beta)
		cdet := (math.Log(alpha) - beta*(alpha-1)) / (alpha + 1)
		crand := (math.Log(alpha) - beta*(alpha-1)) / alpha
		if v := math.Log(alpha) - (alpha-1)*th; math.Abs(v-cdet) > 1e-12 {
			t.Errorf("α=%v: ln α − (α−1)θ = %v, c_det = %v", alpha, v, cdet)
		}
		if v := (th - beta) * (1 - 1/alpha); math.Abs(v-cdet) > 1e-12 {
			t.Errorf("α=%v: (θ−β)(1−1/α) = %v, c_det = %v", alpha, v, cdet)
		}
		if l.prob(beta) != 0 || l.prob(l.ell) != 1 {
			t.Errorf("α=%v: p_rand(β) = %v, p_rand(L) = %v", alpha, l.prob(beta), l.prob(l.ell))
		}
		if v := l.prob(th); math.Abs(v-alpha/(alpha+1)) > 1e-12 {
			t.Errorf("α=%v: p_rand(θ_det) = %v, want α/(α+1)", alpha, v)
		}
		if math.Abs(crand/cdet-(1+1/alpha)) > 1e-12 {
			t.Errorf("α=%v: c_rand/c_det = %v", alpha, crand/cdet)
		}
	}
	// The numbers docs/spec/ALGORITHMS.md §4.3 quotes for the defaults.
	alpha, beta := 1.32, 0.0269
	L := math.Log(alpha) / (alpha - 1)
	for name, got := range map[string][2]float64{
		"L":      {L, 0.8676},
		"θ_det":  {SwinThetaDet(alpha, beta), 0.5052},
		"c_rand": {(math.Log(alpha) - beta*(alpha-1)) / alpha, 0.2038},
		"c_det":  {(math.Log(alpha) - beta*(alpha-1)) / (alpha + 1), 0.1160},
	} {
		if math.Abs(got[0]-got[1]) > 5e-5 {
			t.Errorf("%s = %.5f, docs/spec/ALGORITHMS.md §4.3 says %.4f", name, got[0], got[1])
		}
	}
}

// §8.18: with β = 0 a wrong member's weight drops to 0 and it no longer votes.
func TestWeightedMajorityBetaZeroEliminates(t *testing.T) {
	l := mustNew(t, "weighted-majority", `{"beta":0,"members":[{"name":"perceptron"},{"name":"perceptron"}]}`, Config{Dim: 2}).(*weightedMajority)
	// Make member 1 differ: teach it alone.
	x := mustDense(t, []float64{1, 0})
	m1 := l.members[1]
	p, _ := m1.Predict(x)
	m1.Learn(x, -1, p) // member 1 now predicts −1 on x, member 0 predicts +1
	p, _ = l.Predict(x)
	if err := l.Learn(x, 1, l.Decide(p)); err != nil {
		t.Fatal(err)
	}
	if w := l.weights(); w[0] != 1 || w[1] != 0 {
		t.Fatalf("weights %v, want [1 0]", w)
	}
}

// §8.19: with ηₛ = 1/s, after s steps w = −(λ/s)Σⱼ∇ℓ(wⱼ) exactly (up to rounding).
func TestODMClosedForm(t *testing.T) {
	const lambda = 0.7
	s := gaussStream(3, 300, 4, 60)
	l := mustNew(t, "odm", fmt.Sprintf(`{"lambda":%v,"schedule":"inv_t"}`, lambda), Config{Dim: 4}).(*odm)
	sum := make([]float64, 4) // Σ ∇ℓ(wⱼ) = Σ g(γⱼ)·yⱼ·xⱼ
	for i, x := range s.xs {
		p, _ := l.Predict(x)
		gamma := float64(s.ys[i]) * p.Score
		axpy(sum, l.c.grad(gamma)*float64(s.ys[i]), x)
		l.Learn(x, s.ys[i], l.Decide(p))
		want := make([]float64, 4)
		floats.AddScaled(want, -lambda/float64(i+1), sum)
		if got := l.c.w.dense(); !floats.EqualApprox(got, want, 1e-9) {
			t.Fatalf("after %d steps w = %v, closed form %v", i+1, got, want)
		}
	}
}

// §8.19: identical zero-init candidates that never restart keep uniform weights.
func TestDynamicODMUniformWeights(t *testing.T) {
	s := gaussStream(2, 300, 4, 100)
	l := mustNew(t, "dynamic-odm", `{"periods":[100000,100000,100000],"init":"zero"}`, Config{Dim: 4}).(*dynamicODM)
	play(t, l, s)
	for _, b := range l.mix() {
		if math.Abs(b-1.0/3) > 1e-12 {
			t.Fatalf("weights %v", l.mix())
		}
	}
}

// Restarts follow the periods: candidate i restarts after rounds that are
// multiples of Δᵢ, so its step counter never exceeds Δᵢ.
func TestDynamicODMRestarts(t *testing.T) {
	s := gaussStream(2, 100, 4, 0)
	l := mustNew(t, "dynamic-odm", `{"horizon":100}`, Config{Dim: 4, Seed: 1}).(*dynamicODM)
	if len(l.cands) != 7 { // ⌊log₂ 100⌋ + 1
		t.Fatalf("%d candidates, want 7", len(l.cands))
	}
	for i, x := range s.xs {
		p, _ := l.Predict(x)
		l.Learn(x, s.ys[i], l.Decide(p))
		for c, cand := range l.cands {
			if want := (i+1)%l.periods[c] + 1; cand.s != want {
				t.Fatalf("round %d candidate %d (Δ=%d): s = %d, want %d", i+1, c, l.periods[c], cand.s, want)
			}
		}
	}
}

// §8.21: transformation 2 is unbiased; transformation 1 leaves no nonzero below m.
func TestTrackingWinnowTransformations(t *testing.T) {
	const m = 0.4
	vals := []float64{0, 0.05, 0.19, 0.2, 0.21, 0.35, 0.4, 0.9, 1}
	x := mustDense(t, vals)
	l1 := mustNew(t, "tracking-winnow", fmt.Sprintf(`{"transform":1,"m":%v}`, m), Config{Dim: len(vals)}).(*trackingWinnow)
	xh, _ := l1.transformed(x, &l1.src)
	want1 := []float64{0, 0, 0, 0, m, m, 0.4, 0.9, 1}
	if got := xh.Dense(); !floats.Equal(got, want1) {
		t.Fatalf("transformation 1: %v, want %v", got, want1)
	}
	l2 := mustNew(t, "tracking-winnow", fmt.Sprintf(`{"transform":2,"m":%v}`, m), Config{Dim: len(vals), Seed: 4}).(*trackingWinnow)
	const n = 40000
	mean := make([]float64, len(vals))
	for k := 0; k < n; k++ {
		xh, draws := l2.transformed(x, &l2.src)
		if draws != 5 { // entries strictly inside (0, m)
			t.Fatalf("%d draws, want 5", draws)
		}
		xh.Entries(func(i int, v float64) {
			if v != 0 && v != m && v != vals[i] {
				t.Fatalf("transformed value %v", v)
			}
			mean[i] += v / n
		})
	}
	for i, v := range vals {
		if tol := 4 * math.Sqrt(v*(m-v)/n); math.Abs(mean[i]-v) > tol+1e-12 {
			t.Errorf("E[x̂_%d] = %v, x = %v (tolerance %v)", i, mean[i], v, tol)
		}
	}
}

// Transformation 2 uses the same draws for the prediction and the update, and
// Decide consumes exactly those draws.
func TestTrackingWinnowTransformationDrawsAreConsumedOnce(t *testing.T) {
	s := boxStream(3, 200, 12)
	l := mustNew(t, "tracking-winnow", `{"transform":2,"m":0.5}`, Config{Dim: 12, Seed: 9}).(*trackingWinnow)
	total := 0
	for i, x := range s.xs {
		p, _ := l.Predict(x)
		total += p.draws
		l.Learn(x, s.ys[i], l.Decide(p))
	}
	ref := rngFor(9, "")
	r := rand.New(&ref)
	for i := 0; i < total; i++ {
		r.Float64()
	}
	if ref != l.src {
		t.Fatal("RNG advanced by a different number of draws than the predictions used")
	}
}

// Snapshots of format 1, which held the full covariance, restore into the
// packed form: the learner goes on exactly as the one that wrote them, and
// its next snapshot is the format 2 one that learner writes.
func TestFormat1SnapshotsRestore(t *testing.T) {
	for _, c := range []learnerCase{gaussCase("lasec-ss", `{"a":0.05}`), sparseCase("lasec", ""), gaussCase("sop", ""), gaussCase("bbq", `{"kappa":0.4}`)} {
		t.Run(c.String(), func(t *testing.T) {
			s := c.stream(6, 600)
			l := c.build(t, 3, "k")
			play(t, l, stream{xs: s.xs[:300], ys: s.ys[:300]})
			e := &encoder{}
			e.b = append(e.b, 1) // format 1: the same fields, the full matrix
			var r *rls
			switch l := l.(type) {
			case *secondOrder:
				e.str(l.name)
				e.int(l.dim)
				e.bytes(l.params)
				e.u64(l.version)
				e.rng(&l.src)
				r = &l.r
			case *bbq:
				e.str(l.name)
				e.int(l.dim)
				e.bytes(l.params)
				e.u64(l.version)
				e.int(l.t)
				r = &l.r
			}
			e.int(r.k)
			e.f64s(r.w)
			e.f64s(r.full())
			restored := c.build(t, 3, "k")
			if err := restored.UnmarshalBinary(e.b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(snapshot(t, restored), snapshot(t, l)) {
				t.Fatal("restored from format 1, the snapshot differs")
			}
			rest := stream{xs: s.xs[300:], ys: s.ys[300:]}
			sameRounds(t, "after a format 1 restore", play(t, restored, rest), play(t, l, rest))
		})
	}
}
