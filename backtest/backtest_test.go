package backtest

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"time"

	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/streams"
)

func synthEvents(t testing.TB, spec string, seed uint64) ([]streams.Example, int) {
	t.Helper()
	src, err := streams.OpenSynth(spec, seed)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := Load(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return ev, src.Dim()
}

// The pass's counts, windowed accuracy and curve agree with a hand-rolled
// prequential loop of a randomized sampler.
func TestPassMatchesManualLoop(t *testing.T) {
	ev, dim := synthEvents(t, "synth:switching-gaussian?T=3000&d=8&period=500", 1)
	ev[10].Label = 0 // one unlabeled event: predicted, not scored, not learned
	run, err := PipelinePass(context.Background(), Spec{Name: "lasec-ss", Params: json.RawMessage(`{"a":0.05}`)}, ev, dim, 3, Options{Window: 100, Points: 30})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := learners.New("lasec-ss", json.RawMessage(`{"a":0.05}`), learners.Config{Dim: dim, Seed: 3})
	mistakes, queries, labeled := 0, 0, 0
	var lastWindow []bool
	for _, ex := range ev {
		p, _ := l.Predict(ex.X)
		p = l.Decide(p)
		if p.Query {
			queries++
		}
		if ex.Label == 0 {
			continue
		}
		labeled++
		if p.Label != ex.Label {
			mistakes++
		}
		lastWindow = append(lastWindow, p.Label != ex.Label)
		if p.Query {
			l.Learn(ex.X, ex.Label, p)
		}
	}
	if run.Mistakes != mistakes || run.Queries != queries || run.Labeled != labeled || run.Events != len(ev) {
		t.Fatalf("run %+v, manual mistakes %d queries %d labeled %d", run, mistakes, queries, labeled)
	}
	wrong := 0
	for _, w := range lastWindow[len(lastWindow)-100:] {
		if w {
			wrong++
		}
	}
	last := run.Curve[len(run.Curve)-1]
	if last.Event != len(ev) || last.CumMistakes != mistakes || math.Abs(last.WindowAccuracy-(1-float64(wrong)/100)) > 1e-12 {
		t.Fatalf("last curve point %+v, want window accuracy %v", last, 1-float64(wrong)/100)
	}
	if len(run.Curve) < 30 || len(run.Curve) > 32 {
		t.Fatalf("%d curve points, want about 30", len(run.Curve))
	}
}

func TestCalibrateReachesTargetRate(t *testing.T) {
	ev, dim := synthEvents(t, "synth:switching-gaussian?T=4000&d=10&period=500", 2)
	for _, name := range []string{"perceptron-ss", "sop-ss", "lasec-ss", "bbq-i"} {
		for _, target := range []float64{0.1, 0.4} {
			s, err := Calibrate(context.Background(), Spec{Name: name}, ev, dim, 1, target)
			if err != nil {
				t.Fatal(err)
			}
			run, err := PipelinePass(context.Background(), s, ev, dim, 1, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(run.QueryRate()-target) > 0.02 {
				t.Errorf("%s at target %v: query rate %v with %s", name, target, run.QueryRate(), s.Params)
			}
		}
	}
	// Learners without a query rule pass through unchanged.
	s, _ := Calibrate(context.Background(), Spec{Name: "lasec"}, ev, dim, 1, 0.2)
	if s.Params != nil {
		t.Fatalf("lasec got params %s", s.Params)
	}
}

func TestMeanCI(t *testing.T) {
	ci := meanCI([]float64{1, 2, 3, 4})
	// mean 2.5, sd 1.29099, se 0.645497, t(3, .975) = 3.182446
	if math.Abs(ci.Mean-2.5) > 1e-12 || math.Abs(ci.Hi-(2.5+3.182446*0.645497)) > 1e-5 {
		t.Fatalf("%+v", ci)
	}
	if one := meanCI([]float64{0.7}); one.Lo != 0.7 || one.Hi != 0.7 {
		t.Fatalf("%+v", one)
	}
}

func TestCompareWritesReport(t *testing.T) {
	data := func(ctx context.Context, r int) ([]streams.Example, int, error) {
		src, err := streams.OpenSynth("synth:sea?T=2000&block=500", uint64(r)+1)
		if err != nil {
			return nil, 0, err
		}
		ev, err := Load(ctx, src)
		return ev, src.Dim(), err
	}
	res, err := Compare(context.Background(), Config{Name: "sea", Data: data, Seed: 1, Repeats: 3,
		Learners: []Spec{{Name: "perceptron"}, {Name: "lasec", Params: json.RawMessage(`{"c":10}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteFiles(dir, res); err != nil {
		t.Fatal(err)
	}
	if err := Plot(dir, res); err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum["events"].(float64) != 2000 || len(sum["learners"].([]any)) != 2 {
		t.Fatalf("summary %s", b)
	}
	for _, l := range sum["learners"].([]any) {
		for _, k := range []string{"name", "params", "mistakes", "accuracy", "queries", "query_rate", "events_per_sec", "accuracy_ci95"} {
			if _, ok := l.(map[string]any)[k]; !ok {
				t.Errorf("learner entry lacks %q", k)
			}
		}
	}
	ci := res.Summary.Learners[0].AccuracyCI
	if !(ci.Lo < ci.Mean && ci.Mean < ci.Hi) {
		t.Fatalf("3 repeats on re-drawn streams should give a non-degenerate interval: %+v", ci)
	}
	curve, _ := os.ReadFile(filepath.Join(dir, "curve.csv"))
	if !strings.HasPrefix(string(curve), "learner,repeat,event,cumulative_mistakes,window_accuracy,time\n") || strings.Count(string(curve), "\n") < 2*3*100 {
		t.Fatalf("curve.csv too short: %d lines", strings.Count(string(curve), "\n"))
	}
	for _, f := range []string{"accuracy.svg", "accuracy.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

// Labels that arrive as label records right after their event give exactly
// the run that inline labels give; labels for unknown ids are counted.
func TestDelayedLabels(t *testing.T) {
	ev, dim := synthEvents(t, "synth:switching-gaussian?T=1500&d=6&period=300", 4)
	var delayed []streams.Example
	for _, ex := range ev {
		u := ex
		u.Label = 0
		delayed = append(delayed, u, streams.Example{ID: ex.ID, Label: ex.Label, LabelRecord: true})
	}
	delayed = append(delayed, streams.Example{ID: "never-seen", Label: 1, LabelRecord: true}, streams.Example{ID: ev[0].ID, Label: 1, LabelRecord: true})
	for _, s := range []Spec{{Name: "lasec"}, {Name: "perceptron-ss", Params: json.RawMessage(`{"b":2}`)}} {
		a, err := PipelinePass(context.Background(), s, ev, dim, 1, Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := PipelinePass(context.Background(), s, delayed, dim, 1, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if a.Mistakes != b.Mistakes || a.Queries != b.Queries || a.Labeled != b.Labeled || b.Delayed != len(ev) || b.Unknown != 2 {
			t.Fatalf("%s: inline %+v vs delayed %+v", s.Name, a, b)
		}
	}
}

// SynthData draws repeat r with seed + r: the same seed gives the same stream,
// the next repeat a different one.
func TestSynthDataSeeds(t *testing.T) {
	ctx := context.Background()
	a, _, _ := SynthData("synth:sea?T=50", 7, nil)(ctx, 1)
	b, _, _ := SynthData("synth:sea?T=50", 8, nil)(ctx, 0)
	c, _, _ := SynthData("synth:sea?T=50", 7, nil)(ctx, 0)
	if a[0].X.At(0) != b[0].X.At(0) || a[0].X.At(0) == c[0].X.At(0) {
		t.Fatal("repeat r of seed s must be the stream of seed s + r")
	}
	_, dim, _ := SynthData("synth:sea?T=5", 1, streams.WithBias)(ctx, 0)
	if dim != 4 {
		t.Fatalf("wrapped dimension %d, want 4", dim)
	}
}

// Curves whose events all carry a time are drawn over event time.
func TestPlotOverEventTime(t *testing.T) {
	t0 := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	res := Result{Summary: Summary{Data: "timed", Events: 3, Repeats: 1, Learners: []LearnerSummary{{Name: "perceptron"}}},
		Runs: [][]Run{{{Curve: []Point{{Event: 1, WindowAccuracy: 0.5, Time: t0}, {Event: 2, WindowAccuracy: 0.6, Time: t0.Add(time.Hour)},
			{Event: 3, CumMistakes: 1, WindowAccuracy: 0.7, Time: t0.Add(2 * time.Hour)}}}}}}
	if !timed(res) {
		t.Fatal("timed curves not recognized")
	}
	dir := t.TempDir()
	if err := Plot(dir, res); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "accuracy.svg"))
	if err != nil || !bytes.Contains(svg, []byte("event time (UTC)")) {
		t.Fatalf("the plot is not over event time: %v", err)
	}
	res.Runs[0][0].Curve[1].Time = time.Time{}
	if timed(res) {
		t.Fatal("a curve with an untimed point drawn over time")
	}
}

// Drift alerts are marked on the accuracy curve, at their events.
func TestAlertMarks(t *testing.T) {
	run := Run{Curve: []Point{{Event: 10, WindowAccuracy: 0.5}, {Event: 20, WindowAccuracy: 0.7}, {Event: 30, WindowAccuracy: 0.9}},
		Alerts: map[string][]int{"adwin/mistakes": {14, 29}, "ddm/mistakes": {99}}}
	marks := alertMarks(run, func(p Point) float64 { return p.WindowAccuracy }, false)
	if len(marks) != 3 {
		t.Fatalf("%d marks for 3 alerts", len(marks))
	}
	for _, m := range marks {
		want := map[float64]float64{15: 0.7, 30: 0.9, 100: 0.9}[m.X]
		if m.Y != want {
			t.Fatalf("mark %+v, want y %v", m, want)
		}
	}
}

// The accuracy panel leaves out the points over fewer than minWindow
// labels: the first events swing between 0 and 1 and would set the y axis.
func TestAccuracyPanelSkipsTheFirstPoints(t *testing.T) {
	curve := []Point{{Event: 1, WindowAccuracy: 0, WindowLabeled: 1}, {Event: 10, WindowAccuracy: 1, WindowLabeled: 10},
		{Event: 100, WindowAccuracy: 0.8, WindowLabeled: 100}, {Event: 200, WindowAccuracy: 0.85, WindowLabeled: 200}}
	res := Result{Summary: Summary{Window: 200, Learners: []LearnerSummary{{Name: "a"}, {Name: "b"}}},
		Runs: [][]Run{{{Curve: curve}}, {{Curve: curve}}}}
	acc := func(p Point) float64 { return p.WindowAccuracy }
	p, err := panel(res, "accuracy", 200, acc)
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Min != 0.8 || p.Y.Max != 0.85 {
		t.Fatalf("y axis %v..%v, want 0.8..0.85: the first points stretch it", p.Y.Min, p.Y.Max)
	}
	// Curves written before WindowLabeled existed are drawn whole.
	old := []Point{{Event: 1, WindowAccuracy: 0}, {Event: 100, WindowAccuracy: 0.8}}
	p, _ = panel(Result{Summary: Summary{Learners: []LearnerSummary{{Name: "a"}}}, Runs: [][]Run{{{Curve: old}}}}, "accuracy", 500, acc)
	if p.Y.Min != 0 {
		t.Fatalf("an old curve lost its first point: y from %v", p.Y.Min)
	}
}

// Calibration stops at the first step whose query count is the closest to
// the target the event count allows (no later step could do better), and
// runs all 30 steps when the target cannot be reached.
func TestCalibrateStopsOnTarget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rate      func(kappa float64) float64
		wantSteps int
		wantKappa string
	}{
		// kappa 0.5, 0.25, 0.375, 0.3125, 0.28125, 0.296875, 0.3046875,
		// 0.30078125: 300 of 1000 queries, on target at step 8.
		{"reachable", func(k float64) float64 { return k }, 8, "0.300781"},
		{"unreachable", func(k float64) float64 { return map[bool]float64{false: 0, true: 1}[k >= 0.5] }, 30, "0.25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := 0
			pass := func(_ context.Context, s Spec, events []streams.Example, _ int, _ uint64, _ Options) (Run, error) {
				steps++
				var p struct{ Kappa float64 }
				if err := json.Unmarshal(s.Params, &p); err != nil {
					return Run{}, err
				}
				return Run{Events: len(events), Queries: int(math.Floor(tc.rate(p.Kappa) * float64(len(events))))}, nil
			}
			s, err := CalibrateWith(context.Background(), pass, Spec{Name: "bbq-i"}, make([]streams.Example, 1000), 2, 1, 0.3, nil)
			if err != nil {
				t.Fatal(err)
			}
			var p map[string]json.RawMessage
			json.Unmarshal(s.Params, &p)
			if steps != tc.wantSteps || string(p["kappa"]) != tc.wantKappa {
				t.Fatalf("%d steps chose kappa %s; want %d steps, %s", steps, p["kappa"], tc.wantSteps, tc.wantKappa)
			}
		})
	}
}
