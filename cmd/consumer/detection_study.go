package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/config"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
)

// detectionScenario is a keyed stream whose drift points are known: every
// key has a concept of its own (a random hyperplane in dimension
// detectionDim) and a label noise that changes at the key's halfway point.
type detectionScenario struct {
	name string
	// noise is the label-noise rate of event i of n; flip reverses the
	// concept from the halfway point on.
	noise func(i, n int) float64
	flip  bool
	// kind: "rise" (the quality falls at the halfway point: alerts after it
	// are detections, before it false), "stationary" (every alert is false),
	// "improving" (alerts from improvingAt on are alerts on a key that got
	// better, before it false).
	kind string
	// improvingAt is where an improving scenario's keys start to get better,
	// as a share of their events.
	improvingAt float64
}

const detectionDim = 10

func detectionScenarios() []detectionScenario {
	half := func(a, b float64) func(i, n int) float64 {
		return func(i, n int) float64 {
			if i < n/2 {
				return a
			}
			return b
		}
	}
	return []detectionScenario{
		// The goals' rise: the learners' own mistake rate goes from about
		// 0.2 to 0.5 (the table prints the measured rates).
		{name: "rise 0.05→0.5 (noise)", noise: half(0.05, 0.5), kind: "rise"},
		{name: "rise 0.2→0.5 (noise)", noise: half(0.2, 0.5), kind: "rise"},
		{name: "concept flip", noise: half(0.1, 0.1), flip: true, kind: "rise"},
		{name: "stationary 0.2", noise: half(0.2, 0.2), kind: "stationary"},
		{name: "stationary 0.05", noise: half(0.05, 0.05), kind: "stationary"},
		{name: "improving 0.5→0.2", noise: half(0.5, 0.2), kind: "improving", improvingAt: 0.5},
		{name: "learning curve", noise: half(0.02, 0.02), kind: "improving", improvingAt: 0},
	}
}

// exampleTruth is what the generator knows of an example and the service does
// not: its label before the noise, and the noise rate it was drawn with.
type exampleTruth struct {
	clean int
	noise float64
}

// expectedMistake is the probability that prediction is wrong on the
// example: the noise rate when it agrees with the clean label, one minus it
// when not. Averaged over a key's events it is the key's quality without
// the labels' noise.
func (t exampleTruth) expectedMistake(prediction int) float64 {
	if prediction == t.clean {
		return t.noise
	}
	return 1 - t.noise
}

// examples deals the scenario's keys' events in a seeded random order, with
// each example's truth.
func (s detectionScenario) examples(keys, events int, seed uint64) ([]streams.Example, []exampleTruth) {
	r := rand.New(rand.NewPCG(seed, 31))
	type keyGen struct {
		w    []float64
		next int
	}
	gens := make([]keyGen, keys)
	for k := range gens {
		w := make([]float64, detectionDim)
		for j := range w {
			w[j] = r.NormFloat64()
		}
		gens[k].w = w
	}
	order := make([]int, 0, keys*events)
	for k := range keys {
		for range events {
			order = append(order, k)
		}
	}
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	exs := make([]streams.Example, 0, len(order))
	truths := make([]exampleTruth, 0, len(order))
	for _, k := range order {
		g := &gens[k]
		i := g.next
		g.next++
		x := make([]float64, detectionDim)
		m := 0.0
		for j := range x {
			x[j] = r.NormFloat64()
			m += g.w[j] * x[j]
		}
		y := 1
		if m < 0 {
			y = -1
		}
		if s.flip && i >= events/2 {
			y = -y
		}
		clean, noise := y, s.noise(i, events)
		if r.Float64() < noise {
			y = -y
		}
		v, _ := learners.NewDense(x)
		exs = append(exs, streams.Example{ID: fmt.Sprintf("%d", i), Key: fmt.Sprintf("key-%03d", k), X: v, Label: y})
		truths = append(truths, exampleTruth{clean: clean, noise: noise})
	}
	return exs, truths
}

// detectionScore is one detector and signal on one scenario, pooled over
// its keys.
type detectionScore struct {
	Detector string `json:"detector"`
	Signal   string `json:"signal"`
	Scenario string `json:"scenario"`
	Kind     string `json:"kind"`
	Keys     int    `json:"keys"`
	// Detected counts the keys (rise scenarios) alerted within the window
	// after their drift point; DelayMedian is the median distance, in the
	// key's events.
	Detected    int      `json:"detected"`
	DelayMedian *float64 `json:"delay_median"` // nil when none was detected
	// FalsePer100k is the alerts not explained by a drift (before the drift
	// point, or any on a stationary stream) per key per 100,000 of its
	// events; ImprovingAlerts counts alerts on keys that got better.
	FalsePer100k    float64 `json:"false_per_key_per_100k"`
	ImprovingAlerts int     `json:"improving_alerts"`
	// MistakesBefore and MistakesAfter are the learner's own mistake rate
	// over the keys' events before and after the halfway point, pooled over
	// the keys: the rise (or fall) the detectors saw, not the labels' noise.
	MistakesBefore float64 `json:"mistake_rate_before"`
	MistakesAfter  float64 `json:"mistake_rate_after"`
	// Alerts counts every alert of the run; Worse those on a key that had
	// got worse by the generator's truth (see detectionRun.worse), whatever
	// the scenario says of the keys as a whole.
	Alerts int `json:"alerts"`
	Worse  int `json:"alerts_on_keys_that_got_worse"`
}

// worseNote says how many of the alerts of a scenario without a drift
// were on keys that had got worse all the same.
func (s detectionScore) worseNote() string {
	if s.Alerts == 0 {
		return ""
	}
	return fmt.Sprintf("; %d of %d on keys that got worse", s.Worse, s.Alerts)
}

// runDetection runs every detector and signal of the catalog (or -detectors)
// on every scenario through the service's pipeline with a real learner, and
// scores the alerts against the known drift points.
func runDetection(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("detection", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keys := fs.Int("keys", 40, "keys per scenario")
	events := fs.Int("events", 4000, "events per key (the drift point is halfway)")
	learner := fs.String("learner", "perceptron", "the keys' learner (see 'consumer learners')")
	params := fs.String("learner-params", "", "its parameters, a JSON object")
	seed := fs.Uint64("seed", 1, "seed of the streams and the learners")
	window := fs.Int("window", 1000, "a rise counts as detected by an alert within this many of the key's events after it")
	detectorsFlag := fs.String("detectors", "all", `detectors to score: a JSON list of {"detector","signal","params"}, "all" (every detector on every signal it can watch) or "default" (the service's DRIFTSTREAM_DETECTORS)`)
	out := fs.String("out", "", "directory for detection.json and detection.md (optional)")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fail := failer("detection", stderr)
	if fs.NArg() > 0 || *keys < 1 || *events < 100 || *window < 1 {
		return fail(fmt.Errorf("-keys ≥ 1, -events ≥ 100 and -window ≥ 1, no arguments"), exitUsage)
	}
	var specs []keyed.DetectorSpec
	switch *detectorsFlag {
	case "default":
		specs = config.DefaultDetectors()
	default: // a JSON list, or "all"
		var err error
		if specs, err = detectorSpecs(*detectorsFlag); err != nil {
			return fail(err, exitUsage)
		}
	}
	vec, _ := topics.NewVectorizer(detectionDim, 0)
	base := pipeline.Config{Settings: keyed.Settings{Learner: *learner, Params: json.RawMessage(*params), Seed: *seed, Vector: vec, QueryScale: 1}, MaxKeyBytes: -1}
	if *params == "" {
		base.Params = nil
	}
	var usable []keyed.DetectorSpec
	for _, spec := range specs {
		cfg := base
		cfg.Detectors = []keyed.DetectorSpec{spec}
		if err := cfg.Validate(); err != nil {
			return fail(err, exitUsage)
		}
		usable = append(usable, spec)
	}
	ctx := context.Background()
	var scores []detectionScore
	for _, sc := range detectionScenarios() {
		exs, truths := sc.examples(*keys, *events, *seed)
		for _, spec := range usable {
			if !*quiet {
				fmt.Fprintf(stderr, "detection: %s, %s on %s\n", sc.name, spec.Detector, spec.Signal)
			}
			cfg := base
			cfg.Detectors = []keyed.DetectorSpec{spec}
			run, err := keyedAlerts(ctx, cfg, exs, truths, *events)
			if err != nil {
				return fail(err, exitError)
			}
			s := scoreDetection(sc, spec, run.alerts, *keys, *events, *window)
			s.MistakesBefore, s.MistakesAfter = run.rate(0), run.rate(1)
			s.Alerts, s.Worse = run.worse()
			scores = append(scores, s)
		}
	}
	table := detectionTable(scores, *learner, *keys, *events, *window)
	fmt.Fprint(stdout, table)
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return fail(err, exitError)
		}
		b, err := json.MarshalIndent(scores, "", "  ")
		if err != nil {
			return fail(err, exitError)
		}
		command := "go run ./cmd/consumer detection " + strings.Join(args, " ")
		if err := errors.Join(os.WriteFile(filepath.Join(*out, "detection.json"), append(b, '\n'), 0o644),
			os.WriteFile(filepath.Join(*out, "detection.md"), []byte(table+"\n`"+command+"`\n"), 0o644)); err != nil {
			return fail(err, exitError)
		}
	}
	return exitOK
}

// detectionRun is what one replay of a scenario gave: each key's alerts as
// indexes of the key's events, and the learner's mistakes on either side of
// the halfway point.
type detectionRun struct {
	alerts           map[string][]int
	wrong, predicted [2]int
	// expected holds each key's expected mistake of every event (see
	// exampleTruth.expectedMistake), by the key's event index.
	expected map[string][]float64
}

// worseWindow is how many of a key's last events worse compares with the
// events before them, and worseBy how much higher their expected mistake
// rate must be: 5 points, a fall an on-call engineer would want to hear of.
const (
	worseWindow = 250
	worseBy     = 0.05
)

// worse counts the alerts, and those on a key that had got worse: whose
// expected mistake rate (the truth, without the labels' noise) over its
// last worseWindow events before the alert is at least worseBy above its
// rate over the events before those, since its previous alert (or its start). An alert
// with fewer than worseWindow events before that window counts as not.
func (r detectionRun) worse() (alerts, worse int) {
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	for key, as := range r.alerts {
		e := r.expected[key]
		from := 0
		for _, a := range as {
			alerts++
			if a-worseWindow-from >= worseWindow && a <= len(e) && mean(e[a-worseWindow:a]) >= mean(e[from:a-worseWindow])+worseBy {
				worse++
			}
			from = a
		}
	}
	return alerts, worse
}

// rate is the learner's mistake rate before (half 0) or after (half 1) the
// halfway point.
func (r detectionRun) rate(half int) float64 {
	return float64(r.wrong[half]) / float64(max(r.predicted[half], 1))
}

// keyedAlerts replays exs through the pipeline (one partition), collecting
// the alerts and scoring the predictions against the examples' labels.
func keyedAlerts(ctx context.Context, cfg pipeline.Config, exs []streams.Example, truths []exampleTruth, events int) (detectionRun, error) {
	run := detectionRun{alerts: map[string][]int{}, expected: map[string][]float64{}}
	in, err := backtest.FromExamples(detectionDim, exs, backtest.MessageOptions{Keys: 1}, 1, false) // Keys: for examples without one; these have theirs
	if err != nil {
		return run, err
	}
	type known struct {
		label int
		truth exampleTruth
	}
	labels := make(map[[2]string]known, len(exs))
	for j, e := range exs {
		labels[[2]string{e.Key, e.ID}] = known{e.Label, truths[j]}
		if run.expected[e.Key] == nil {
			run.expected[e.Key] = make([]float64, events)
		}
	}
	var mu sync.Mutex
	collect := func(_ int, outs []pipeline.Output) error {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range outs {
			if o.Kind != pipeline.OutAlert && o.Kind != pipeline.OutPrediction {
				continue
			}
			var a struct {
				Key   string `json:"key"`
				ID    string `json:"id"`
				Label int    `json:"label"`
			}
			if err := json.Unmarshal(o.Value, &a); err != nil {
				return err
			}
			i, err := strconv.Atoi(a.ID)
			if err != nil {
				return fmt.Errorf("%s for event id %q: %w", o.Kind, a.ID, err)
			}
			if o.Kind == pipeline.OutAlert {
				run.alerts[a.Key] = append(run.alerts[a.Key], i)
				continue
			}
			k, ok := labels[[2]string{a.Key, a.ID}]
			if !ok || i < 0 || i >= events {
				return fmt.Errorf("a prediction for an event not replayed: key %q, id %q", a.Key, a.ID)
			}
			half := min(i/(events/2), 1)
			run.predicted[half]++
			if a.Label != k.label {
				run.wrong[half]++
			}
			run.expected[a.Key][i] = k.truth.expectedMistake(a.Label)
		}
		return nil
	}
	if _, err := backtest.Replay(ctx, backtest.ReplayConfig{Name: "detection", Pipeline: cfg, Outputs: collect}, in); err != nil {
		return run, err
	}
	return run, nil
}

// scoreDetection scores one run's alerts against the scenario's drift point
// (halfway through every key's events).
func scoreDetection(sc detectionScenario, spec keyed.DetectorSpec, alerts map[string][]int, keys, events, window int) detectionScore {
	s := detectionScore{Detector: spec.Detector, Signal: spec.Signal, Scenario: sc.name, Kind: sc.kind, Keys: keys}
	drift := events / 2
	falseAlerts, falseEvents := 0, 0
	var delays []float64
	for k := range keys {
		as := alerts[fmt.Sprintf("key-%03d", k)]
		switch sc.kind {
		case "stationary":
			falseAlerts += len(as)
			falseEvents += events
		case "improving":
			from := int(sc.improvingAt * float64(events))
			falseEvents += from
			for _, a := range as {
				if a >= from {
					s.ImprovingAlerts++
				} else {
					falseAlerts++
				}
			}
		case "rise":
			falseEvents += drift
			found := false
			for _, a := range as {
				switch {
				case a < drift:
					falseAlerts++
				case !found && a < drift+window:
					found = true
					delays = append(delays, float64(a-drift))
				}
			}
			if found {
				s.Detected++
			}
		}
	}
	if falseEvents > 0 {
		s.FalsePer100k = float64(falseAlerts) / float64(falseEvents) * 1e5
	}
	if len(delays) > 0 {
		slices.Sort(delays)
		s.DelayMedian = &delays[len(delays)/2]
	}
	return s
}

// detectionTable prints the scores as a Markdown table, one row per
// detector and signal.
func detectionTable(scores []detectionScore, learner string, keys, events, window int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "drift detection through the service's pipeline: learner %s, %d keys × %d events per scenario, drift at each key's event %d; detected = alerted within %d events; false alerts per key per 100k events (before the drift, or any on a stationary stream); the service's per-key cooldown (%d). “on keys that got worse”: the key's expected mistake rate by the generator's truth (without the labels' noise) over its %d events before the alert was at least %.2f above its rate before those, since its previous alert\n\n",
		learner, keys, events, events/2, window, keyed.DefaultAlertCooldown, worseWindow, worseBy)
	var scen []string
	for _, s := range scores {
		if !slices.Contains(scen, s.Scenario) {
			scen = append(scen, s.Scenario)
		}
	}
	b.WriteString("| detector / signal |")
	for _, sc := range scen {
		b.WriteString(" " + sc + " |")
	}
	b.WriteString("\n|---|")
	for range scen {
		b.WriteString("---|")
	}
	b.WriteString("\n| *the learner's own mistake rate, first half → second half* |")
	for _, sc := range scen {
		for _, s := range scores {
			if s.Scenario == sc {
				fmt.Fprintf(&b, " %.2f → %.2f |", s.MistakesBefore, s.MistakesAfter)
				break
			}
		}
	}
	b.WriteString("\n")
	type row struct{ detector, signal string }
	var rows []row
	byRow := map[row]map[string]detectionScore{}
	for _, s := range scores {
		r := row{s.Detector, s.Signal}
		if byRow[r] == nil {
			byRow[r] = map[string]detectionScore{}
			rows = append(rows, r)
		}
		byRow[r][s.Scenario] = s
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s / %s |", r.detector, r.signal)
		for _, sc := range scen {
			s := byRow[r][sc]
			switch s.Kind {
			case "rise":
				delay := "–"
				if s.DelayMedian != nil {
					delay = fmt.Sprintf("%.0f", *s.DelayMedian)
				}
				fmt.Fprintf(&b, " %d/%d, delay %s, false %.1f |", s.Detected, s.Keys, delay, s.FalsePer100k)
			case "stationary":
				fmt.Fprintf(&b, " false %.1f%s |", s.FalsePer100k, s.worseNote())
			default:
				if s.FalsePer100k > 0 {
					fmt.Fprintf(&b, " %d alerts (false %.1f before)%s |", s.ImprovingAlerts, s.FalsePer100k, s.worseNote())
				} else {
					fmt.Fprintf(&b, " %d alerts%s |", s.ImprovingAlerts, s.worseNote())
				}
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
