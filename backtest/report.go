package backtest

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/driftstream/driftstream/streams"
)

// Data yields the events of repeat r: a file gives the same events every
// time; a generator re-draws its stream with seed + r.
type Data func(ctx context.Context, r int) (events []streams.Example, dim int, err error)

// SynthData is the Data of a generator spec ("synth:NAME?k=v"): repeat r draws
// the stream with seed seed + r. wrap, when not nil, wraps each source (for
// example streams.WithBias).
func SynthData(spec string, seed uint64, wrap func(streams.Source) streams.Source) Data {
	return func(ctx context.Context, r int) ([]streams.Example, int, error) {
		src, err := streams.OpenSynth(spec, seed+uint64(r))
		if err != nil {
			return nil, 0, err
		}
		if wrap != nil {
			src = wrap(src)
		}
		ev, err := Load(ctx, src)
		return ev, src.Dim(), err
	}
}

// Config is a comparison of learners on one data source.
type Config struct {
	// Name describes the data in the summary (a path or a synth: spec).
	Name     string
	Data     Data
	Learners []Spec
	Seed     uint64
	Repeats  int
	// QueryRateTarget, when > 0, calibrates every sampling learner's query
	// parameter so that its query rate on repeat 0 is this share (see Calibrate).
	QueryRateTarget float64
	// Pass runs one learner over the events; nil is PipelinePass.
	Pass Pass
	Options
}

// Pass runs one learner (spec, seeded with seed) over events of dimension
// dim and reports the run: PipelinePass, or it with detectors or a
// population model (PipelinePassWith).
type Pass func(ctx context.Context, spec Spec, events []streams.Example, dim int, seed uint64, opts Options) (Run, error)

func (c Config) pass() Pass {
	if c.Pass != nil {
		return c.Pass
	}
	return PipelinePass
}

// Summary is summary.json (docs/spec/DESIGN.md §5), with confidence intervals added.
type Summary struct {
	Data            string  `json:"data"`
	Events          int     `json:"events"`
	Repeats         int     `json:"repeats"`
	Seed            uint64  `json:"seed"`
	QueryRateTarget float64 `json:"query_rate_target,omitempty"`
	// Window is the number of labeled outcomes windowed accuracy covers.
	Window   int              `json:"window"`
	Learners []LearnerSummary `json:"learners"`
}

// LearnerSummary is one learner's row: means over the repeats.
type LearnerSummary struct {
	Name             string          `json:"name"`
	Params           json.RawMessage `json:"params"`
	Mistakes         float64         `json:"mistakes"`
	Accuracy         float64         `json:"accuracy"`
	AccuracyCI       Interval        `json:"accuracy_ci95"`
	ExpectedMistakes float64         `json:"expected_mistakes"`
	Queries          float64         `json:"queries"`
	QueryRate        float64         `json:"query_rate"`
	// RequestRate is the label requests the pipeline emitted per event
	// (Run.Requests).
	RequestRate  float64 `json:"label_request_rate"`
	EventsPerSec float64 `json:"events_per_sec"`
}

// Result holds the summary and every run, [learner][repeat].
type Result struct {
	Summary Summary
	Runs    [][]Run
}

// Compare evaluates every learner on every repeat.
func Compare(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Repeats < 1 {
		cfg.Repeats = 1
	}
	if len(cfg.Learners) == 0 {
		return Result{}, fmt.Errorf("no learners to compare")
	}
	res := Result{Summary: Summary{Data: cfg.Name, Repeats: cfg.Repeats, Seed: cfg.Seed, QueryRateTarget: cfg.QueryRateTarget, Window: cfg.Options.WindowSize()}}
	res.Runs = make([][]Run, len(cfg.Learners))
	specs := append([]Spec(nil), cfg.Learners...)
	for r := 0; r < cfg.Repeats; r++ {
		events, dim, err := cfg.Data(ctx, r)
		if err != nil {
			return Result{}, err
		}
		if r == 0 {
			res.Summary.Events = len(events)
			if cfg.QueryRateTarget > 0 {
				for i, s := range specs {
					if specs[i], err = CalibrateWith(ctx, cfg.pass(), s, events, dim, cfg.Seed, cfg.QueryRateTarget, cfg.Progress); err != nil {
						return Result{}, err
					}
				}
			}
		}
		for i, s := range specs {
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "repeat %d/%d: %s on %d events\n", r+1, cfg.Repeats, s.label(), len(events))
			}
			run, err := cfg.pass()(ctx, s, events, dim, cfg.Seed+uint64(r), cfg.Options)
			if err != nil {
				return Result{}, err
			}
			res.Runs[i] = append(res.Runs[i], run)
		}
	}
	for i, s := range specs {
		res.Summary.Learners = append(res.Summary.Learners, summarize(s, res.Runs[i]))
	}
	return res, nil
}

func summarize(s Spec, runs []Run) LearnerSummary {
	var acc []float64
	var ls LearnerSummary
	ls.Name = s.label()
	ls.Params = s.Params
	if len(ls.Params) == 0 {
		ls.Params = json.RawMessage("{}")
	}
	events, secs := 0, 0.0
	for _, r := range runs {
		acc = append(acc, r.Accuracy())
		ls.Mistakes += float64(r.Mistakes) / float64(len(runs))
		ls.ExpectedMistakes += r.Expected / float64(len(runs))
		ls.Queries += float64(r.Queries) / float64(len(runs))
		ls.QueryRate += r.QueryRate() / float64(len(runs))
		if r.Events > 0 {
			ls.RequestRate += float64(r.Requests) / float64(r.Events) / float64(len(runs))
		}
		events += r.Events
		secs += r.Seconds
	}
	ls.AccuracyCI = meanCI(acc)
	ls.Accuracy = ls.AccuracyCI.Mean
	if secs > 0 {
		ls.EventsPerSec = float64(events) / secs
	}
	return ls
}

// queryParam is the parameter that sets a sampler's query rate, the range to
// search, and whether to search it on a log scale. Larger values query more.
func queryParam(name string) (param string, lo, hi float64, logScale bool, ok bool) {
	switch name {
	case "perceptron-ss":
		return "b", 1e-4, 1e6, true, true
	case "sop-ss":
		return "b", 1e-7, 1e3, true, true
	case "lasec-ss":
		return "a", 1e-7, 1e3, true, true
	case "bbq", "bbq-i":
		return "kappa", 0, 1, false, true
	}
	return "", 0, 0, false, false
}

// Calibrate sets a sampling learner's query parameter so that its query rate
// on events is as close to target as bisection finds in 30 steps (the rate is
// monotone in the parameter up to sampling noise; the seed is fixed, so the
// search is deterministic). It stops earlier once a step's query count is
// the closest to target that the event count allows: no later step could
// do strictly better, so the choice is the one all 30 steps would make. Learners without a query rule are returned as
// they are. The chosen value is written into the spec's parameters, which the
// summary reports.
func Calibrate(ctx context.Context, s Spec, events []streams.Example, dim int, seed uint64, target float64) (Spec, error) {
	return CalibrateWith(ctx, PipelinePass, s, events, dim, seed, target, nil)
}

// CalibrateWith is Calibrate over the given pass, printing a line per
// bisection step to progress when it is set (a step is a whole pass).
func CalibrateWith(ctx context.Context, pass Pass, s Spec, events []streams.Example, dim int, seed uint64, target float64, progress io.Writer) (Spec, error) {
	param, lo, hi, logScale, ok := queryParam(s.Name)
	if !ok {
		return s, nil
	}
	params := map[string]json.RawMessage{}
	if len(s.Params) > 0 {
		if err := json.Unmarshal(s.Params, &params); err != nil {
			return s, fmt.Errorf("%s: parameters: %w", s.label(), err)
		}
	}
	with := func(v float64) Spec {
		out := s
		params[param] = json.RawMessage(strconv.FormatFloat(v, 'g', 6, 64))
		out.Params, _ = json.Marshal(params)
		return out
	}
	best, bestGap := with(lo), math.Inf(1)
	for step := 0; step < 30; step++ {
		mid := (lo + hi) / 2
		if logScale {
			mid = math.Sqrt(lo * hi)
		}
		cand := with(mid)
		run, err := pass(ctx, cand, events, dim, seed, Options{Points: 1})
		if err != nil {
			return s, fmt.Errorf("calibrate %s: %w", s.label(), err)
		}
		rate := run.QueryRate()
		if progress != nil {
			fmt.Fprintf(progress, "  calibrate %s: step %d/30, %s=%.4g gives query rate %.4f (target %.4f)\n", s.label(), step+1, param, mid, rate, target)
		}
		if gap := math.Abs(rate - target); gap < bestGap {
			best, bestGap = cand, gap
		}
		if bestGap <= closestRate(target, run.Events) {
			if progress != nil {
				fmt.Fprintf(progress, "  calibrate %s: on target after %d steps\n", s.label(), step+1)
			}
			break
		}
		if rate < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return best, nil
}

// closestRate is the smallest gap between target and a query rate q/events
// for a whole number of queries q (computed as the rates are).
func closestRate(target float64, events int) float64 {
	if events <= 0 {
		return 0
	}
	e := float64(events)
	q := math.Floor(target * e)
	return min(math.Abs(q/e-target), math.Abs((q+1)/e-target))
}

// WriteFiles writes summary.json and curve.csv into dir.
func WriteFiles(dir string, res Result) error {
	rows := [][]string{{"learner", "repeat", "event", "cumulative_mistakes", "window_accuracy", "time"}}
	for i, ls := range res.Summary.Learners {
		for r, run := range res.Runs[i] {
			for _, p := range run.Curve {
				ts := ""
				if !p.Time.IsZero() {
					ts = p.Time.Format(time.RFC3339Nano)
				}
				rows = append(rows, []string{ls.Name, strconv.Itoa(r), strconv.Itoa(p.Event), strconv.Itoa(p.CumMistakes), strconv.FormatFloat(p.WindowAccuracy, 'f', 6, 64), ts})
			}
		}
	}
	return WriteSummary(dir, res.Summary, "curve.csv", rows)
}

// WriteSummary writes summary as dir/summary.json (indented) and rows (the
// first one the header) as dir/csvName, creating dir.
func WriteSummary(dir string, summary any, csvName string, rows [][]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(summary, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, csvName))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
