package experiments

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/streams"
)

// Every experiment's stream and learners are valid, so a reproduction never
// fails on its own configuration.
func TestCatalogIsValid(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Catalog() {
		if seen[e.Name] || e.Paper == "" || e.Claim == "" || e.Repeats < 1 {
			t.Errorf("%s: duplicate or incomplete", e.Name)
		}
		seen[e.Name] = true
		if e.Table != nil {
			if e.Protocol == "" {
				t.Errorf("%s: a table experiment must say its protocol", e.Name)
			}
			continue
		}
		src, err := streams.OpenSynth(strings.ReplaceAll(e.Data, "{data}", dataDir(t)), 1)
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		for _, s := range e.Learners {
			if _, err := learners.New(s.Name, s.Params, learners.Config{Dim: src.Dim()}); err != nil {
				t.Errorf("%s: %v", e.Name, err)
			}
		}
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "crammer-random-d5") {
		t.Fatalf("Lookup error %v", err)
	}
}

// One repeat of the seed-000 random-drift experiment lands in the paper's
// 250–300 mistake range for the Perceptron, and the report names the claim.
func TestCrammerRandomDriftOneRepeat(t *testing.T) {
	e, _ := Lookup("crammer-random-d5")
	res, err := backtest.Compare(context.Background(), e.Config(1, 1, "", backtest.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Summary.Learners[0].Mistakes; m < 200 || m > 380 {
		t.Fatalf("Perceptron made %v mistakes", m)
	}
	md := e.Markdown(res, "cmd", "")
	if !strings.Contains(md, "250–300") || !strings.Contains(md, "| perceptron |") {
		t.Fatalf("markdown:\n%s", md)
	}
}

// dataDir is ../shared/data (or $DRIFTSTREAM_DATA); CI always has it.
func dataDir(t *testing.T) string {
	if d := os.Getenv("DRIFTSTREAM_DATA"); d != "" {
		return d
	}
	d := filepath.Join("..", "..", "shared", "data")
	if _, err := os.Stat(d); err != nil {
		t.Skipf("shared data not present at %s (set DRIFTSTREAM_DATA)", d)
	}
	return d
}

// The ODM defaults are a point of the tuning grid, and the step that
// ODMSetting.Params picks for standardized inputs of any width — by the
// dimension rule, or by the learner's step guard at each of the grid's κ —
// is inside the learner's stability bound even for an input at the clip
// bound in every coordinate, so no table run stops on an unstable step.
func TestODMStepRuleIsStable(t *testing.T) {
	def := defaultODMSetting()
	inGrid := false
	settings := []ODMSetting{def, {Lambda: 1, Theta: 0.3, Mu: 0.5, EtaLambda: 1e-2}}
	for _, g := range odmGrid() {
		inGrid = inGrid || g == def
		if g.EtaLambda == 1e-2 && g.Lambda == 1 && g.Theta == 0.3 {
			settings = append(settings, g) // the largest step, at every guard of the grid
		}
	}
	if !inGrid {
		t.Fatalf("defaults %+v are not a grid point", def)
	}
	for _, s := range settings {
		for _, features := range []int{1, 2, 3, 8, 100, 256} {
			params, el := s.Params(features)
			x := make([]float64, features+1)
			for i := range x {
				x[i] = learners.StandardizeClip
			}
			x[features] = 1 // the bias passes through
			for _, name := range []string{"odm", "dynamic-odm"} {
				l, err := learners.New(name, params, learners.Config{Dim: features + 1, Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				v, _ := learners.NewDense(x)
				p, _ := l.Predict(v)
				if err := l.Learn(v, -1, l.Decide(p)); err != nil {
					t.Fatalf("%s, %d features, ηλ = %g: %v", name, features, el, err)
				}
			}
		}
	}
}

// Every tuning grid names one of its experiment's learners and every
// candidate builds; tuning draws that meet the evaluated ones are refused.
func TestTuningGridsAreValidAndDisjoint(t *testing.T) {
	for _, e := range Catalog() {
		for _, g := range e.Tune {
			found := false
			for _, s := range e.Learners {
				if specName(s) == g.Label {
					found = true
					for _, p := range g.Params {
						if _, err := learners.New(s.Name, []byte(p), learners.Config{Dim: 3}); err != nil {
							t.Errorf("%s: %s %s: %v", e.Name, g.Label, p, err)
						}
					}
				}
			}
			if !found {
				t.Errorf("%s: grid for %q, not one of its learners", e.Name, g.Label)
			}
		}
	}
	e, _ := Lookup("moroshko-supervised")
	if _, _, err := e.Tuned(context.Background(), 100, 3, "", backtest.Options{}); err == nil || !strings.Contains(err.Error(), "meet") {
		t.Fatalf("tuning on draws 101–105 and evaluating 100–102: %v", err)
	}
}

// Tuned runs every candidate on the tuning draws and keeps the best: the
// chosen candidate's accuracy on those draws is the highest of the grid.
func TestTunedKeepsTheBestCandidate(t *testing.T) {
	grid := []string{`{"c":3}`, `{"c":30}`, `{"c":1000}`}
	e := Experiment{Name: "t", Data: "synth:switching-gaussian?d=5&T=600&period=200", Repeats: 1,
		Learners: []backtest.Spec{spec("perceptron", "", ""), spec("lasec", "", "")},
		Tune:     []Grid{{Label: "lasec", Params: grid}}, TuneOn: TuneDraws{First: 50, Count: 2}}
	tuned, report, err := e.Tuned(context.Background(), 1, 1, "", backtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cands []backtest.Spec
	for _, p := range grid {
		cands = append(cands, spec("lasec", p, p))
	}
	res, err := backtest.Compare(context.Background(), backtest.Config{Data: backtest.SynthData(e.Data, 50, nil), Learners: cands, Seed: 50, Repeats: 2})
	if err != nil {
		t.Fatal(err)
	}
	best := 0
	for k, ls := range res.Summary.Learners {
		if ls.Accuracy > res.Summary.Learners[best].Accuracy {
			best = k
		}
	}
	if got := string(tuned.Learners[1].Params); got != grid[best] || !strings.Contains(report, "**chosen**") || tuned.Learners[0].Name != "perceptron" {
		t.Fatalf("chose %s, the best on the tuning draws is %s\n%s", got, grid[best], report)
	}
}

// theorem1 reduces to the disjunction form RunWinnowBound uses when δ = 1
// and ζ = 1, and reports its conditions: α < e, ε < 1/λ, a positive
// denominator.
func TestTheorem1Form(t *testing.T) {
	const alpha, lambda, H, N = 2.0, 100.0, 14.0, 30.0
	eps := 1 / (50 * lambda)
	got, ok := theorem1(alpha, eps, lambda, 1, 1, H, N)
	el := eps * lambda
	want := (1 - el + alpha) / (2 * (1 - el)) * (H*(math.Log(alpha)+math.Log(1/eps))/math.Log(alpha) + N)
	if !ok || math.Abs(got-want) > 1e-9*want {
		t.Fatalf("δ = ζ = 1: %v (%v), disjunction form %v", got, ok, want)
	}
	for _, bad := range [][4]float64{{3, eps, lambda, 0.5}, {1.5, 2 / lambda, lambda, 0.5}, {2.5, eps, lambda, 0.1}} {
		if _, ok := theorem1(bad[0], bad[1], bad[2], bad[3], 0.25, H, N); ok {
			t.Errorf("α %v, ε %v, λ %v, δ %v: conditions reported as holding", bad[0], bad[1], bad[2], bad[3])
		}
	}
}

// The generated threshold stream's bookkeeping is what its definition
// says: H(C) = k plus one per replacement, ζ the smallest nonzero value.
func TestThresholdStreamBookkeeping(t *testing.T) {
	st, err := newThresholdStream(3, 50, 3, 5000, 1000, 0.5, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.H != 3+4 || st.Zeta != 0.25 || st.V != 3 || len(st.events) != 5000 || st.N <= 0 {
		t.Fatalf("H %v, ζ %v, V %v, %d events, N %v", st.H, st.Zeta, st.V, len(st.events), st.N)
	}
	l1 := 0.0
	for _, ex := range st.events {
		s := 0.0
		ex.X.Entries(func(_ int, v float64) { s += v })
		l1 = math.Max(l1, s)
	}
	if l1 != st.Lambda {
		t.Fatalf("λ %v, max ‖x‖₁ %v", st.Lambda, l1)
	}
}

// The curve tables read cumulative mistakes at the last point at or before a
// round: a learner that errs on every one of the first 100 rounds after each
// switch (period 500) and never otherwise shows 100 and 0.
func TestCurveTables(t *testing.T) {
	var run backtest.Run
	m := 0
	for e := 1; e <= 2000; e++ {
		if e > 500 && (e-1)%500 < 100 { // rounds 501–600, 1001–1100, 1501–1600
			m++
		}
		if e%20 == 0 {
			run.Curve = append(run.Curve, backtest.Point{Event: e, CumMistakes: m})
		}
	}
	res := backtest.Result{Summary: backtest.Summary{Events: 2000, Learners: []backtest.LearnerSummary{{Name: "l"}}}, Runs: [][]backtest.Run{{run}}}
	if got := recoveryTable(res, 500, 100); !strings.Contains(got, "| l | 100.0 | 0.0 |") {
		t.Fatalf("recovery table:\n%s", got)
	}
	if got := mistakesAtTable(res, []int{500, 610, 2000}); !strings.Contains(got, "| l | 0.0 | 100.0 | 300.0 |") {
		t.Fatalf("mistakes-at table:\n%s", got)
	}
}

// The spam set reads as 9,324 messages of 500 binary features, the words in
// the most messages, with the file's labels (2,387 spam), in file order.
func TestSpamSetHas500FrequentWords(t *testing.T) {
	src, err := openSpam(dataDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if src.Dim() != spamFeatures {
		t.Fatalf("dimension %d", src.Dim())
	}
	n, spam, ones := 0, 0, make([]int, spamFeatures)
	for {
		ex, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		if ex.Label == 1 {
			spam++
		}
		for j, v := range ex.X.Dense() {
			if v != 0 && v != 1 {
				t.Fatalf("message %d: feature %d = %v", n, j, v)
			}
			ones[j] += int(v)
		}
	}
	if n != 9324 || spam != 2387 {
		t.Fatalf("%d messages, %d spam", n, spam)
	}
	// Columns are in order of frequency: the first word is in at least as
	// many messages as the last, and every kept word is in some message.
	if ones[0] < ones[spamFeatures-1] || ones[spamFeatures-1] == 0 {
		t.Fatalf("the kept words' frequencies: first %d, last %d", ones[0], ones[spamFeatures-1])
	}
}

// Tuning renames a tuned learner (name and chosen parameters), and the
// pairs that named it by its label follow it, so that the report finds
// both sides of every pair.
func TestTunedPairsFollowTheRename(t *testing.T) {
	e := Experiment{Name: "t", Data: "synth:sea?T=300", Repeats: 1,
		Learners: []backtest.Spec{spec("odm", `{"lambda":1}`, "odm, a"), spec("perceptron", "", "")},
		Tune:     []Grid{{Label: "odm, a", Params: []string{`{"lambda":1}`, `{"lambda":4}`}}},
		TuneOn:   TuneDraws{First: 101, Count: 2},
		Pairs:    [][2]string{{"odm, a", "perceptron"}}}
	tuned, _, err := e.Tuned(context.Background(), 1, 1, "", backtest.Options{Points: 1})
	if err != nil {
		t.Fatal(err)
	}
	label := specName(tuned.Learners[0])
	if !strings.HasPrefix(label, "odm (tuned ") || tuned.Pairs[0] != [2]string{label, "perceptron"} || e.Pairs[0][0] != "odm, a" {
		t.Fatalf("tuned learner %q, pairs %v (the experiment's own: %v)", label, tuned.Pairs, e.Pairs)
	}
}
