package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
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
// detectionDim) and a label noise that may change.
type detectionScenario struct {
	name string
	// noise is the label-noise rate of event i of n; flip reverses the
	// concept from the halfway point on.
	noise func(i, n int) float64
	flip  bool
	// kind: "rise" (the quality falls: alerts from its start, `from`, to
	// the detection window after the halfway point are detections, before
	// it false), "stationary" (every alert is false), "improving" (alerts
	// from improvingAt on are alerts on a key that got better, before it
	// false).
	kind string
	// from is where a rise starts, as a share of the key's events (the
	// halfway point when 0): a gradual rise starts before it and reaches
	// +0.2 at it.
	from float64
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
	// ramp goes from a to b between the shares lo and hi of the events.
	ramp := func(a, b, lo, hi float64) func(i, n int) float64 {
		return func(i, n int) float64 {
			f := float64(i) / float64(n)
			switch {
			case f < lo:
				return a
			case f >= hi:
				return b
			}
			return a + (b-a)*(f-lo)/(hi-lo)
		}
	}
	return []detectionScenario{
		// The goals' rise: the learners' own mistake rate goes from about
		// 0.2 to 0.5 (the table prints the measured rates).
		{name: "rise 0.05→0.5 (noise)", noise: half(0.05, 0.5), kind: "rise"},
		{name: "rise 0.2→0.5 (noise)", noise: half(0.2, 0.5), kind: "rise"},
		{name: "gradual rise 0.05→0.45", noise: ramp(0.05, 0.45, 0.4, 0.6), kind: "rise", from: 0.4},
		{name: "concept flip", noise: half(0.1, 0.1), flip: true, kind: "rise"},
		{name: "stationary 0.2", noise: half(0.2, 0.2), kind: "stationary"},
		{name: "stationary 0.05", noise: half(0.05, 0.05), kind: "stationary"},
		{name: "near-perfect 0.001", noise: half(0.001, 0.001), kind: "stationary"},
		{name: "noise drops 0.3→0.05", noise: half(0.3, 0.05), kind: "improving", improvingAt: 0.5},
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

// detectionAges are the edges of the key ages, in the key's events, by
// which false alerts are counted: false alerts grow with a key's age.
var detectionAges = []int{0, 2000, 5000, 10000, math.MaxInt32}

// detectionScore is one configuration of detectors (one detector and
// signal, or the service's set) on one scenario, pooled over its keys.
type detectionScore struct {
	Config   string `json:"config"`
	Scenario string `json:"scenario"`
	Kind     string `json:"kind"`
	Keys     int    `json:"keys"`
	// Detected counts the keys (rise scenarios) alerted from the rise's
	// start to the window after the halfway point; DelayMedian is the
	// median distance from the halfway point, in the key's events.
	Detected    int      `json:"detected"`
	DelayMedian *float64 `json:"delay_median"` // nil when none was detected
	// AlertsPerChange is the mean number of alerts of a detected key from
	// the rise's start on (1: one alert per change), MaxPerChange the most.
	AlertsPerChange float64 `json:"alerts_per_change"`
	MaxPerChange    int     `json:"max_alerts_per_change"`
	// FalsePer100k is the alerts not explained by a drift (before the rise,
	// before an improvement, or any on a stationary stream) per key per
	// 100,000 of its events; FalseByAge the same by the key's age
	// (detectionAges). ImprovingAlerts counts alerts on keys that got
	// better.
	FalsePer100k   float64   `json:"false_per_key_per_100k"`
	FalseByAge     []float64 `json:"false_per_key_per_100k_by_age"`
	ImprovingWorse int       `json:"improving_alerts_on_keys_that_got_worse"`
	// UnexplainedPer100k counts only the false alerts on keys that had not
	// got worse by the generator's truth (see detectionRun.worse): the
	// detector's own false alarms, which the goals bound.
	UnexplainedPer100k float64 `json:"unexplained_per_key_per_100k"`
	ImprovingAlerts    int     `json:"improving_alerts"`
	// MistakesBefore and MistakesAfter are the learner's own mistake rate
	// over the keys' events before and after the halfway point, pooled over
	// the keys: the rise (or fall) the detectors saw, not the labels' noise.
	MistakesBefore float64 `json:"mistake_rate_before"`
	MistakesAfter  float64 `json:"mistake_rate_after"`
	// Alerts counts every alert of the run; ShowRise those whose record
	// shows a rise of at least the minimum (rate_recent − rate_reference);
	// Worse those on a key that had got worse by the generator's truth (see
	// detectionRun.worse), whatever the scenario says of the keys as a
	// whole.
	Alerts   int `json:"alerts"`
	ShowRise int `json:"alerts_showing_the_rise"`
	Worse    int `json:"alerts_on_keys_that_got_worse"`
	// Absorbed counts the detections that joined an open incident,
	// BelowRise those whose rise was under the minimum.
	Absorbed  int64 `json:"detections_absorbed"`
	BelowRise int64 `json:"detections_below_rise"`
}

// runDetection runs detectors (each alone, or the service's set together
// as it ships) on every scenario through the service's pipeline with a
// real learner, scores the alerts against the known drift points, and
// checks the goals of docs/OPERATIONS.md.
func runDetection(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("detection", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keys := fs.Int("keys", 40, "keys per scenario")
	events := fs.Int("events", 10000, "events per key (the drift point is halfway); false alerts grow with a key's age")
	learnerFlag := fs.String("learner", "perceptron", "the keys' learner (see 'consumer learners')")
	params := fs.String("learner-params", "", "its parameters, a JSON object")
	seed := fs.Uint64("seed", 1, "seed of the streams and the learners")
	window := fs.Int("window", 1000, "a rise counts as detected by an alert within this many of the key's events after it")
	detectorsFlag := fs.String("detectors", "default", `detectors to score: "default" (the service's DRIFTSTREAM_DETECTORS, run together as the service runs them), "all" (every detector on every signal it can watch, each alone), or a JSON list (each alone; with -together, as one set)`)
	together := fs.Bool("together", false, "run a JSON list of -detectors as one set, with one incident per key, as the service does (always so with default)")
	minRiseFlag := fs.Float64("alert-min-rise", keyed.DefaultAlertMinRise, "the alerts' minimum rise (DRIFTSTREAM_ALERT_MIN_RISE); 0: any")
	cooldown := fs.Int64("alert-cooldown", keyed.DefaultAlertCooldown, "events without a detection that close an incident (DRIFTSTREAM_ALERT_COOLDOWN)")
	realData := fs.String("real", "", "also replay this keyed JSONL file (no known drift: every alert is counted by the key's age), e.g. scripts/keyed-data.py's airquality.jsonl")
	realDim := fs.Int("real-dim", 18, "-real: the length of its dense \"x\"")
	realKey := fs.String("real-key", "key", "-real: its key field")
	service := fs.Bool("service", false, "run the service's whole configuration (DRIFTSTREAM_* and defaults: learner, population model, intercept, detectors, alert settings) instead of -learner and -detectors")
	out := fs.String("out", "", "directory for detection.json and detection.md (optional)")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fail := failer("detection", stderr)
	if fs.NArg() > 0 || *keys < 1 || *events < 100 || *window < 1 || *minRiseFlag < 0 || *minRiseFlag >= 1 || *cooldown < 1 {
		return fail(fmt.Errorf("-keys ≥ 1, -events ≥ 100, -window ≥ 1, -alert-cooldown ≥ 1, -alert-min-rise in [0, 1), no arguments"), exitUsage)
	}
	st := detectionStudy{keys: *keys, events: *events, window: *window, seed: *seed, quiet: *quiet, stderr: stderr}
	st.base = pipeline.Config{Settings: keyed.Settings{Learner: *learnerFlag, Params: json.RawMessage(*params), Seed: *seed, QueryScale: 1,
		AlertMinRise: minRise(*minRiseFlag), AlertCooldown: *cooldown}, MaxKeyBytes: -1}
	if *params == "" {
		st.base.Params = nil
	}
	if *service {
		var err error
		if st.base, st.bias, err = serviceDetection(*seed); err != nil {
			return fail(err, exitUsage)
		}
		*detectorsFlag = "default"
	}
	configs, err := detectionConfigs(*detectorsFlag, *together)
	if err != nil {
		return fail(err, exitUsage)
	}
	for _, c := range configs {
		cfg := st.base
		cfg.Vector = st.vector(detectionDim)
		cfg.Detectors = c.specs
		if err := cfg.Validate(); err != nil {
			return fail(err, exitUsage)
		}
	}
	ctx := context.Background()
	scores, err := st.synthetic(ctx, configs)
	if err != nil {
		return fail(err, exitError)
	}
	if *realData != "" {
		real, err := st.real(ctx, configs, *realData, *realDim, *realKey)
		if err != nil {
			return fail(err, exitError)
		}
		scores = append(scores, real...)
	}
	table := detectionTable(scores, st, *minRiseFlag, *cooldown)
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

// detectionConfig is a set of detectors scored as one.
type detectionConfig struct {
	name  string
	specs []keyed.DetectorSpec
}

// detectionConfigs reads -detectors: the service's set as one
// configuration, or each detector alone (together: as one set).
func detectionConfigs(flagValue string, together bool) ([]detectionConfig, error) {
	var specs []keyed.DetectorSpec
	if flagValue == "default" {
		specs, together = config.DefaultDetectors(), true
	} else {
		var err error
		if specs, err = detectorSpecs(flagValue); err != nil {
			return nil, err
		}
	}
	if len(specs) == 0 {
		return nil, usageError{errors.New("-detectors: none to score")}
	}
	if together {
		var names []string
		for _, s := range specs {
			names = append(names, s.Detector+"/"+s.Signal)
		}
		return []detectionConfig{{name: strings.Join(names, " + "), specs: specs}}, nil
	}
	var out []detectionConfig
	for _, s := range specs {
		out = append(out, detectionConfig{name: s.Detector + "/" + s.Signal, specs: []keyed.DetectorSpec{s}})
	}
	return out, nil
}

// detectionStudy is one run of the study: its sizes and base configuration.
type detectionStudy struct {
	keys, events, window int
	seed                 uint64
	base                 pipeline.Config
	bias                 bool // the inputs get the intercept's constant feature (the service's DRIFTSTREAM_BIAS)
	quiet                bool
	stderr               io.Writer
}

// vector is the study's vectorizer for dense inputs of dim.
func (st detectionStudy) vector(dim int) topics.Vectorizer {
	v, _ := topics.NewVectorizer(dim, 0)
	if st.bias {
		v = v.WithBias()
	}
	return v
}

// serviceDetection is the service's pipeline configuration (its
// DRIFTSTREAM_* environment and defaults), with seed: what ships.
func serviceDetection(seed uint64) (pipeline.Config, bool, error) {
	c, err := config.Load(flag.NewFlagSet("service", flag.ContinueOnError), nil)
	if err != nil {
		return pipeline.Config{}, false, err
	}
	c.Dim, c.HashBits, c.Seed = detectionDim, 0, seed
	p, err := pipelineConfig(c)
	p.MaxKeyBytes = -1
	return p, c.Bias, err
}

// synthetic scores every configuration on every generated scenario.
func (st detectionStudy) synthetic(ctx context.Context, configs []detectionConfig) ([]detectionScore, error) {
	var scores []detectionScore
	for _, sc := range detectionScenarios() {
		exs, truths := sc.examples(st.keys, st.events, st.seed)
		for _, c := range configs {
			if !st.quiet {
				fmt.Fprintf(st.stderr, "detection: %s, %s\n", sc.name, c.name)
			}
			cfg := st.base
			cfg.Vector = st.vector(detectionDim)
			cfg.Detectors = c.specs
			run, err := keyedAlerts(ctx, cfg, detectionDim, exs, truths, st.events)
			if err != nil {
				return nil, err
			}
			worse := run.markWorse()
			s := scoreDetection(sc, c.name, run, st.keys, st.events, st.window)
			s.Worse = worse
			s.MistakesBefore, s.MistakesAfter = run.rate(0), run.rate(1)
			scores = append(scores, s)
		}
	}
	return scores, nil
}

// real replays a keyed file with no known drift through every
// configuration: each alert is counted, by the key's age.
func (st detectionStudy) real(ctx context.Context, configs []detectionConfig, path string, dim int, keyField string) ([]detectionScore, error) {
	data, err := dataSource(path, "jsonl", streams.CSVOptions{}, streams.JSONLOptions{Dim: dim, KeyField: keyField}, false, st.seed)
	if err != nil {
		return nil, err
	}
	exs, _, err := data(ctx, 0)
	if err != nil {
		return nil, err
	}
	// Renumbered per key (the study reads a key's age from the event's id);
	// the truth is unknown: noise 0 makes the expected mistake the mistake.
	next := map[string]int{}
	truths := make([]exampleTruth, len(exs))
	most := 0
	for i := range exs {
		n := next[exs[i].Key]
		exs[i].ID = strconv.Itoa(n)
		next[exs[i].Key] = n + 1
		most = max(most, n+1)
		truths[i] = exampleTruth{clean: exs[i].Label}
	}
	var scores []detectionScore
	for _, c := range configs {
		if !st.quiet {
			fmt.Fprintf(st.stderr, "detection: %s, %s\n", path, c.name)
		}
		cfg := st.base
		cfg.Vector = st.vector(dim)
		cfg.Detectors = c.specs
		run, err := keyedAlerts(ctx, cfg, dim, exs, truths, most)
		if err != nil {
			return nil, err
		}
		s := detectionScore{Config: c.name, Scenario: "real: " + filepath.Base(path), Kind: "real", Keys: len(next), FalseByAge: make([]float64, len(detectionAges)-1),
			Absorbed: run.totals.DetectionsAbsorbed, BelowRise: run.totals.DetectionsBelowRise}
		var ageAlerts, ageEvents [8]int
		total := 0
		for key, n := range next {
			for b := range len(detectionAges) - 1 {
				ageEvents[b] += max(0, min(n, detectionAges[b+1])-detectionAges[b])
			}
			for _, a := range run.alerts[key] {
				total++
				s.ShowRise += boolInt(a.showsRise)
				if b := ageBucket(a.at); b >= 0 {
					ageAlerts[b]++
				}
			}
		}
		s.Alerts = total
		s.FalsePer100k = float64(total) / float64(len(exs)) * 1e5
		for b := range s.FalseByAge {
			if ageEvents[b] > 0 {
				s.FalseByAge[b] = float64(ageAlerts[b]) / float64(ageEvents[b]) * 1e5
			}
		}
		s.MistakesBefore, s.MistakesAfter = run.rate(0), run.rate(1)
		scores = append(scores, s)
	}
	return scores, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ageBucket is the detectionAges bucket of a key's event index (-1 past
// the last edge).
func ageBucket(i int) int {
	for b := range len(detectionAges) - 1 {
		if i < detectionAges[b+1] {
			return b
		}
	}
	return -1
}

// detectionAlert is an alert of the study: the key's event index, and
// whether the record shows a rise of at least its minimum.
type detectionAlert struct {
	at        int
	showsRise bool
	worse     bool // on a key that had got worse by the generator's truth (markWorse)
}

// detectionRun is what one replay of a scenario gave: each key's alerts as
// indexes of the key's events, and the learner's mistakes on either side of
// the halfway point.
type detectionRun struct {
	alerts           map[string][]detectionAlert
	wrong, predicted [2]int
	// expected holds each key's expected mistake of every event (see
	// exampleTruth.expectedMistake), by the key's event index.
	expected map[string][]float64
	totals   pipeline.Totals
}

// worseWindow is how many of a key's last events worse compares with the
// events before them, and worseBy how much higher their expected mistake
// rate must be: 5 points, a fall an on-call engineer would want to hear of.
const (
	worseWindow = 250
	worseBy     = 0.05
)

// markWorse marks the alerts on a key that had got worse, and counts
// them: whose expected mistake rate (the truth, without the labels' noise)
// over its last worseWindow events before the alert is at least worseBy
// above its rate over the events before those, since its previous alert
// (or its start). An alert with fewer than worseWindow events before that
// window counts as not.
func (r detectionRun) markWorse() (worse int) {
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
		for j := range as {
			a := as[j].at
			if a-worseWindow-from >= worseWindow && a <= len(e) && mean(e[a-worseWindow:a]) >= mean(e[from:a-worseWindow])+worseBy {
				as[j].worse = true
				worse++
			}
			from = a
		}
	}
	return worse
}

// rate is the learner's mistake rate before (half 0) or after (half 1) the
// halfway point.
func (r detectionRun) rate(half int) float64 {
	return float64(r.wrong[half]) / float64(max(r.predicted[half], 1))
}

// keyedAlerts replays exs through the pipeline (one partition), collecting
// the alerts (not the resolved records) and scoring the predictions
// against the examples' labels; events is the most events of a key.
func keyedAlerts(ctx context.Context, cfg pipeline.Config, dim int, exs []streams.Example, truths []exampleTruth, events int) (detectionRun, error) {
	run := detectionRun{alerts: map[string][]detectionAlert{}, expected: map[string][]float64{}}
	in, err := backtest.FromExamples(dim, exs, backtest.MessageOptions{Keys: 1}, 1, false) // Keys: for examples without one; these have theirs
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
				topics.DriftAlert
				Label int `json:"label"`
			}
			if err := json.Unmarshal(o.Value, &a); err != nil {
				return err
			}
			i, err := strconv.Atoi(a.ID)
			if err != nil {
				return fmt.Errorf("%s for event id %q: %w", o.Kind, a.ID, err)
			}
			if o.Kind == pipeline.OutAlert {
				if a.Kind == topics.AlertOpened {
					shows := a.Recent-a.Reference >= max(a.MinRise, 0) && a.Recent > a.Reference
					run.alerts[a.Key] = append(run.alerts[a.Key], detectionAlert{at: i, showsRise: shows})
				}
				continue
			}
			k, ok := labels[[2]string{a.Key, a.ID}]
			if !ok || i < 0 || i >= events {
				return fmt.Errorf("a prediction for an event not replayed: key %q, id %q", a.Key, a.ID)
			}
			half := min(i/max(events/2, 1), 1)
			run.predicted[half]++
			if a.Label != k.label {
				run.wrong[half]++
			}
			run.expected[a.Key][i] = k.truth.expectedMistake(a.Label)
		}
		return nil
	}
	rep, err := backtest.Replay(ctx, backtest.ReplayConfig{Name: "detection", Pipeline: cfg, Outputs: collect}, in)
	if err != nil {
		return run, err
	}
	run.totals = rep.Totals
	return run, nil
}

// scoreDetection scores one run's alerts against the scenario's drift point
// (halfway through every key's events).
func scoreDetection(sc detectionScenario, name string, run detectionRun, keys, events, window int) detectionScore {
	s := detectionScore{Config: name, Scenario: sc.name, Kind: sc.kind, Keys: keys, FalseByAge: make([]float64, len(detectionAges)-1),
		Absorbed: run.totals.DetectionsAbsorbed, BelowRise: run.totals.DetectionsBelowRise}
	drift, from := events/2, events/2
	if sc.from > 0 {
		from = int(sc.from * float64(events))
	}
	if sc.kind == "improving" {
		from = int(sc.improvingAt * float64(events))
	}
	if sc.kind == "stationary" {
		from = events
	}
	falseAlerts, unexplained := 0, 0
	var ageAlerts [8]int
	var delays []float64
	perChange := 0
	for k := range keys {
		as := run.alerts[fmt.Sprintf("key-%03d", k)]
		found, after := false, 0
		for _, a := range as {
			s.Alerts++
			s.ShowRise += boolInt(a.showsRise)
			switch {
			case a.at < from:
				falseAlerts++
				unexplained += boolInt(!a.worse)
				if b := ageBucket(a.at); b >= 0 {
					ageAlerts[b]++
				}
			case sc.kind == "improving":
				s.ImprovingAlerts++
				s.ImprovingWorse += boolInt(a.worse)
			case sc.kind == "rise":
				after++
				if !found && a.at < drift+window {
					found = true
					delays = append(delays, float64(a.at-drift))
				}
			}
		}
		if found {
			s.Detected++
			perChange += after
			s.MaxPerChange = max(s.MaxPerChange, after)
		}
	}
	if from > 0 {
		s.FalsePer100k = float64(falseAlerts) / float64(keys*from) * 1e5
		s.UnexplainedPer100k = float64(unexplained) / float64(keys*from) * 1e5
	}
	for b := range s.FalseByAge {
		if n := max(0, min(from, detectionAges[b+1])-detectionAges[b]); n > 0 {
			s.FalseByAge[b] = float64(ageAlerts[b]) / float64(keys*n) * 1e5
		}
	}
	if s.Detected > 0 {
		s.AlertsPerChange = float64(perChange) / float64(s.Detected)
	}
	if len(delays) > 0 {
		slices.Sort(delays)
		s.DelayMedian = &delays[len(delays)/2]
	}
	return s
}

// detectionGoals checks a configuration's scores against the goals
// (docs/OPERATIONS.md, "Drift alerts"): it returns the goals missed.
func detectionGoals(scores []detectionScore) []string {
	var missed []string
	for _, s := range scores {
		switch {
		case s.Kind == "stationary" && s.UnexplainedPer100k > 1:
			missed = append(missed, fmt.Sprintf("%s: %.1f false alerts per key per 100k on keys that had not got worse (goal ≤ 1)", s.Scenario, s.UnexplainedPer100k))
		case s.Kind == "improving" && s.ImprovingAlerts > s.ImprovingWorse:
			missed = append(missed, fmt.Sprintf("%s: %d alerts after the keys improved, %d of them on keys that had got worse all the same (goal 0 on the others)", s.Scenario, s.ImprovingAlerts, s.ImprovingWorse))
		case s.Kind == "rise" && s.MistakesAfter-s.MistakesBefore >= 0.2 && float64(s.Detected) < 0.95*float64(s.Keys):
			missed = append(missed, fmt.Sprintf("%s: %d of %d rises detected (goal ≥ 95%%)", s.Scenario, s.Detected, s.Keys))
		}
		if s.Kind == "rise" && s.MaxPerChange > 1 {
			missed = append(missed, fmt.Sprintf("%s: up to %d alerts for one change (goal 1)", s.Scenario, s.MaxPerChange))
		}
		if s.ShowRise != s.Alerts {
			missed = append(missed, fmt.Sprintf("%s: %d of %d alert records show the rise (goal all)", s.Scenario, s.ShowRise, s.Alerts))
		}
	}
	return missed
}

// detectionTable prints the scores as a Markdown table, one row per
// configuration, then each configuration's goals.
func detectionTable(scores []detectionScore, st detectionStudy, minRise float64, cooldown int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "drift detection through the service's pipeline: learner %s, %d keys × %d events per scenario, drift at each key's event %d; detected = alerted from the rise's start to %d events after its midpoint; false alerts per key per 100k events (before the rise or the improvement, or any on a stationary stream), then by key age (events 0–2k/2k–5k/5k–10k/10k on); one incident per key (cooldown %d), minimum rise %g. The goals bound the false alerts on keys that had not got worse by the generator's truth. “per change”: alerts of a detected key from the rise on (1: one per change). “on keys that got worse”: the key's expected mistake rate by the generator's truth (without the labels' noise) over its %d events before the alert was at least %.2f above its rate before those, since its previous alert\n\n",
		st.base.Learner, st.keys, st.events, st.events/2, st.window, cooldown, minRise, worseWindow, worseBy)
	var scen, rows []string
	by := map[string]map[string]detectionScore{}
	for _, s := range scores {
		if !slices.Contains(scen, s.Scenario) {
			scen = append(scen, s.Scenario)
		}
		if by[s.Config] == nil {
			by[s.Config] = map[string]detectionScore{}
			rows = append(rows, s.Config)
		}
		by[s.Config][s.Scenario] = s
	}
	b.WriteString("| detectors |")
	for _, sc := range scen {
		b.WriteString(" " + sc + " |")
	}
	b.WriteString("\n|---|")
	for range scen {
		b.WriteString("---|")
	}
	b.WriteString("\n| *the learner's own mistake rate, first half → second half* |")
	for _, sc := range scen {
		s := by[rows[0]][sc]
		fmt.Fprintf(&b, " %.2f → %.2f |", s.MistakesBefore, s.MistakesAfter)
	}
	b.WriteString("\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s |", r)
		for _, sc := range scen {
			b.WriteString(" " + by[r][sc].cell() + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	for _, r := range rows {
		var own []detectionScore
		for _, sc := range scen {
			own = append(own, by[r][sc])
		}
		if missed := detectionGoals(own); len(missed) > 0 {
			fmt.Fprintf(&b, "- %s: goals missed: %s\n", r, strings.Join(missed, "; "))
		} else {
			fmt.Fprintf(&b, "- %s: every goal met\n", r)
		}
	}
	return b.String()
}

// cell is the score's table cell.
func (s detectionScore) cell() string {
	ages := make([]string, len(s.FalseByAge))
	for i, v := range s.FalseByAge {
		ages[i] = fmt.Sprintf("%.1f", v)
	}
	age := " (" + strings.Join(ages, "/") + ")"
	worse := ""
	if s.Alerts > 0 && s.Kind != "rise" && s.Kind != "real" {
		worse = fmt.Sprintf("; %d of %d on keys that got worse", s.Worse, s.Alerts)
	}
	switch s.Kind {
	case "rise":
		delay := "–"
		if s.DelayMedian != nil {
			delay = fmt.Sprintf("%.0f", *s.DelayMedian)
		}
		return fmt.Sprintf("%d/%d, delay %s, %.2f per change, false %.1f", s.Detected, s.Keys, delay, s.AlertsPerChange, s.FalsePer100k)
	case "stationary":
		return fmt.Sprintf("false %.1f%s%s", s.FalsePer100k, age, worse)
	case "improving":
		if s.FalsePer100k > 0 {
			return fmt.Sprintf("%d alerts (false %.1f before)%s", s.ImprovingAlerts, s.FalsePer100k, worse)
		}
		return fmt.Sprintf("%d alerts%s", s.ImprovingAlerts, worse)
	case "real":
		return fmt.Sprintf("%d alerts, %.1f per key per 100k%s", s.Alerts, s.FalsePer100k, age)
	}
	if s.FalsePer100k > 0 {
		return fmt.Sprintf("%d alerts (false %.1f before)%s", s.ImprovingAlerts, s.FalsePer100k, worse)
	}
	return fmt.Sprintf("%d alerts%s", s.ImprovingAlerts, worse)
}
