package experiments

import (
	"context"
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
	md := e.Markdown(res, "cmd")
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
// ODMSetting.Params picks for standardized inputs of any width is inside the
// learner's stability bound even for an input at the clip bound in every
// coordinate, so no table run stops on an unstable step.
func TestODMStepRuleIsStable(t *testing.T) {
	def := defaultODMSetting()
	inGrid := false
	for _, g := range odmGrid() {
		inGrid = inGrid || g == def
	}
	if !inGrid {
		t.Fatalf("defaults %+v are not a grid point", def)
	}
	for _, s := range []ODMSetting{def, {Lambda: 1, Theta: 0.3, Mu: 0.5, EtaLambda: 1e-2}} {
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
