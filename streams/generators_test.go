package streams

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// errEOF is io.EOF under a name the table tests can compare against.
var errEOF = io.EOF

// drainAny reads a source to its end without assuming labels are present.
func drainAny(t *testing.T, src Source) []Example {
	t.Helper()
	var out []Example
	for {
		ex, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if !ex.LabelRecord && ex.X.Dim() != src.Dim() {
			t.Fatalf("example dimension %d, source says %d", ex.X.Dim(), src.Dim())
		}
		out = append(out, ex)
	}
}

// drain reads a labeled source to its end, requiring a ±1 label on every example.
func drain(t *testing.T, src Source) []Example {
	t.Helper()
	out := drainAny(t, src)
	for _, ex := range out {
		if ex.Label != 1 && ex.Label != -1 {
			t.Fatalf("label %d", ex.Label)
		}
	}
	return out
}

func open(t *testing.T, spec string, seed uint64) Source {
	t.Helper()
	src, err := OpenSynth(spec, seed)
	if err != nil {
		t.Fatalf("OpenSynth(%s): %v", spec, err)
	}
	return src
}

func TestGeneratorsAreDeterministicPerSeed(t *testing.T) {
	specs := []string{
		"synth:latent-hyperplane?T=300&d=3&D=20",
		"synth:latent-hyperplane?T=300&drift=linear&normalize=true",
		"synth:switching-gaussian?T=300&d=5&period=50",
		"synth:shifting-disjunction?T=300&n=20&period=50&p_attr=0.05",
		"synth:sea?T=300&block=75",
		"synth:hyperplane?T=300&mag_change=0.01",
	}
	for _, spec := range specs {
		t.Run(spec, func(t *testing.T) {
			a, b, c := drain(t, open(t, spec, 7)), drain(t, open(t, spec, 7)), drain(t, open(t, spec, 8))
			if len(a) != 300 {
				t.Fatalf("%d examples, want T = 300", len(a))
			}
			same := func(x, y []Example) bool {
				for i := range x {
					if x[i].Label != y[i].Label || !slices.Equal(x[i].X.Dense(), y[i].X.Dense()) {
						return false
					}
				}
				return true
			}
			if !same(a, b) {
				t.Fatal("same seed, different streams")
			}
			if same(a, c) {
				t.Fatal("different seeds, same stream")
			}
		})
	}
}

func TestOpenSynthRejects(t *testing.T) {
	tests := []struct {
		spec  string
		err   error
		frags []string
	}{
		{"synth:nope", ErrUnknownGenerator, []string{`"nope"`, "sea", "latent-hyperplane"}},
		{"synth:sea?colour=red", ErrParam, []string{`"colour"`, "valid: T, block, noise_pct, orientation"}},
		{"synth:sea?T=abc", ErrParam, []string{"T = abc", "not an integer"}},
		{"synth:sea?T=0", ErrParam, []string{"T = 0", "≥ 1"}},
		{"synth:sea?noise_pct=120", ErrParam, []string{"noise_pct"}},
		{"synth:sea?orientation=up", ErrParam, []string{"le, gt"}},
		{"synth:sea?T=1&T=2", ErrParam, []string{"given 2 times"}},
		{"synth:latent-hyperplane?sigma=-1", ErrParam, []string{"sigma", "[0,"}},
		{"synth:hyperplane?n_drift=20", ErrParam, []string{"n_drift", "n_features"}},
		{"synth:shifting-disjunction?k0=100", ErrParam, []string{"k0"}},
		{"synth:sea?%zz", ErrParam, []string{"parameters"}},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			_, err := OpenSynth(tc.spec, 1)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			for _, f := range tc.frags {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q lacks %q", err, f)
				}
			}
		})
	}
}

func TestGeneratorCatalogDescribesParameters(t *testing.T) {
	gens := Generators()
	if len(gens) < 5 {
		t.Fatalf("%d generators", len(gens))
	}
	for _, g := range gens {
		if g.Summary == "" || len(g.Params) == 0 {
			t.Errorf("%s: no summary or parameters", g.Name)
		}
		for _, p := range g.Params {
			if p.Doc == "" || p.Default == "" {
				t.Errorf("%s.%s: missing doc or default", g.Name, p.Name)
			}
		}
	}
}

// SEA: y = +1 iff f₁ + f₂ ≤ θ with θ = 8, 9, 7, 9.5 per block; noise_pct of
// labels flipped.
func TestSEAConceptsAndNoise(t *testing.T) {
	exs := drain(t, open(t, "synth:sea?T=40000&block=10000&noise_pct=10", 3))
	thetas := []float64{8, 9, 7, 9.5}
	flipped := 0
	for i, ex := range exs {
		x := ex.X.Dense()
		clean := -1
		if x[0]+x[1] <= thetas[i/10000] {
			clean = 1
		}
		if clean != ex.Label {
			flipped++
		}
		for _, v := range x {
			if v < 0 || v >= 10 {
				t.Fatalf("feature %v outside [0,10)", v)
			}
		}
	}
	if rate := float64(flipped) / float64(len(exs)); math.Abs(rate-0.10) > 4*math.Sqrt(0.09/40000) {
		t.Fatalf("noise rate %v, want 0.10", rate)
	}
	noiseless := drain(t, open(t, "synth:sea?T=1000&noise_pct=0&orientation=gt", 3))
	for _, ex := range noiseless {
		x := ex.X.Dense()
		if (x[0]+x[1] > 8) != (ex.Label == 1) {
			t.Fatal("orientation gt: label disagrees with f₁+f₂ > 8")
		}
	}
}

// §8.20: hyperplane with mag_change = 0 and no noise is a fixed linear concept:
// one weight vector labels every example.
func TestHyperplaneWithoutDriftIsFixed(t *testing.T) {
	exs := drain(t, open(t, "synth:hyperplane?T=2000&noise_pct=0&mag_change=0&n_features=4", 5))
	// Recover the weights' labelling rule: a Perceptron pass must separate the
	// data (it is linearly separable through the bias ½Σw).
	w := make([]float64, 5)
	for pass := 0; pass < 200; pass++ {
		mistakes := 0
		for _, ex := range exs {
			x := append(ex.X.Dense(), -1)
			m := 0.0
			for i := range w {
				m += w[i] * x[i]
			}
			if float64(ex.Label)*m <= 0 {
				mistakes++
				for i := range w {
					w[i] += float64(ex.Label) * x[i]
				}
			}
		}
		if mistakes == 0 {
			return
		}
	}
	t.Fatal("not linearly separable: the concept moved")
}

// Switching-gaussian labels follow one hyperplane within a period.
func TestSwitchingGaussianPeriods(t *testing.T) {
	exs := drain(t, open(t, "synth:switching-gaussian?T=400&d=3&period=200", 1))
	separable := func(part []Example) bool {
		w := make([]float64, 3)
		for pass := 0; pass < 500; pass++ {
			mistakes := 0
			for _, ex := range part {
				x := ex.X.Dense()
				m := w[0]*x[0] + w[1]*x[1] + w[2]*x[2]
				if float64(ex.Label)*m <= 0 {
					mistakes++
					for i := range w {
						w[i] += float64(ex.Label) * x[i]
					}
				}
			}
			if mistakes == 0 {
				return true
			}
		}
		return false
	}
	if !separable(exs[:200]) || !separable(exs[200:]) {
		t.Fatal("a period is not a single homogeneous hyperplane")
	}
	if separable(exs[100:300]) {
		t.Fatal("the target did not switch at the period boundary")
	}
}

// Shifting disjunction: positives have exactly one active literal on, and the
// bookkeeping counts the alternating additions and removals.
func TestShiftingDisjunctionBookkeeping(t *testing.T) {
	src := open(t, "synth:shifting-disjunction?T=5000&n=30&period=1000&k0=4&p_attr=0.02", 2)
	drain(t, src)
	st := src.(*disjunctionSource).Stats()
	// Boundaries at 1000..4000: remove, add, remove, add.
	if st.Additions != 4+2 || st.Removals != 2 {
		t.Fatalf("stats %+v, want 6 additions and 2 removals", st)
	}
	if st.AttributeErrors < 50 || st.AttributeErrors > 150 {
		t.Fatalf("%d attribute errors at rate 0.02 over 5000 rounds", st.AttributeErrors)
	}
}

func TestNextRespectsCancellation(t *testing.T) {
	src := open(t, "synth:sea?T=10", 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

// §8.20: concept-drift with width 0 is an abrupt switch at the position; with
// a width, the share taken from the new stream follows the sigmoid.
func TestConceptDrift(t *testing.T) {
	// sea with orientation le vs gt: every example tells which stream it came from.
	spec := "synth:concept-drift?old=sea&new=sea&old.noise_pct=0&new.noise_pct=0&new.orientation=gt&T=2000&position=1000&width=0"
	exs := drain(t, open(t, spec, 4))
	fromNew := func(ex Example) bool {
		x := ex.X.Dense()
		le := x[0]+x[1] <= 8
		return (ex.Label == 1) != le
	}
	for i, ex := range exs {
		if i+1 < 1000 && fromNew(ex) || i+1 > 1000 && !fromNew(ex) {
			t.Fatalf("example %d came from the wrong stream", i+1)
		}
	}
	spec = strings.Replace(spec, "width=0", "width=400", 1)
	exs = drain(t, open(t, spec, 4))
	count := func(lo, hi int) float64 {
		n := 0
		for _, ex := range exs[lo:hi] {
			if fromNew(ex) {
				n++
			}
		}
		return float64(n) / float64(hi-lo)
	}
	if early, mid, late := count(0, 300), count(900, 1100), count(1700, 2000); early > 0.05 || late < 0.95 || mid < 0.35 || mid > 0.65 {
		t.Fatalf("share from new: early %v, middle %v, late %v", early, mid, late)
	}
	if exs := drain(t, open(t, "synth:concept-drift?T=100", 1)); len(exs) != 100 {
		t.Fatal("defaults do not give a working stream")
	}
	if _, err := OpenSynth("synth:concept-drift?old=sea&new=hyperplane", 1); !errors.Is(err, ErrParam) || !strings.Contains(err.Error(), "dimension") {
		t.Fatalf("dimension mismatch: %v", err)
	}
	if _, err := OpenSynth("synth:concept-drift?old.colour=1", 1); !errors.Is(err, ErrParam) || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("bad sub-parameter: %v", err)
	}
}

func TestDriftingClasses(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < 600; i++ {
		fmt.Fprintf(&b, "%d,%d,%d\n", i%4, i, -i)
	}
	path := filepath.Join(dir, "m.csv")
	os.WriteFile(path, []byte(b.String()), 0o644)
	exs := drain(t, open(t, "synth:drifting-classes?file="+path+","+path+"&period=100", 3))
	if len(exs) != 1200 {
		t.Fatalf("%d rows, want both files concatenated", len(exs))
	}
	changed := 0
	for blk := 0; blk < 12; blk++ {
		pos := map[string]bool{}
		for _, ex := range exs[blk*100 : (blk+1)*100] {
			if ex.Label == 1 {
				pos[ex.Class] = true
			}
		}
		if len(pos) == 0 || len(pos) == 4 {
			t.Fatalf("block %d: %d positive classes (must be neither empty nor all)", blk, len(pos))
		}
		for _, ex := range exs[blk*100 : (blk+1)*100] {
			if (ex.Label == 1) != pos[ex.Class] {
				t.Fatalf("block %d: class %s labelled inconsistently", blk, ex.Class)
			}
		}
		if blk > 0 {
			prev := exs[(blk-1)*100].Label != exs[blk*100].Label || exs[(blk-1)*100+1].Label != exs[blk*100+1].Label
			if prev {
				changed++
			}
		}
	}
	if changed == 0 {
		t.Fatal("the positive set never changed")
	}
	if _, err := OpenSynth("synth:drifting-classes", 1); !errors.Is(err, ErrParam) || !strings.Contains(err.Error(), "file is required") {
		t.Fatalf("missing file: %v", err)
	}
}
