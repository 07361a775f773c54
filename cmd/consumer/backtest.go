package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/config"
	"github.com/driftstream/driftstream/experiments"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
)

// usageError marks errors that the user fixes by changing flags (exit 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// runBacktest replays a file or generator through learners and writes the
// report (docs/spec/DESIGN.md §5).
func runBacktest(args []string, stdout, stderr io.Writer) int {
	var f backtestFlags
	fs := flag.NewFlagSet("backtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.register(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if f.listGen {
		for _, g := range streams.Generators() {
			fmt.Fprintf(stdout, "%s: %s\n", g.Name, g.Summary)
			for _, p := range g.Params {
				fmt.Fprintf(stdout, "  %-12s %-8s %s\n", p.Name, p.Default, p.Doc)
			}
		}
		return exitOK
	}
	if f.experiment == "list" {
		for _, e := range experiments.Catalog() {
			fmt.Fprintf(stdout, "%-24s %s\n", e.Name, e.Paper)
		}
		return exitOK
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "backtest: %v\n", err)
		var ue usageError
		if errors.As(err, &ue) || errors.Is(err, learners.ErrParam) || errors.Is(err, learners.ErrUnknownLearner) ||
			errors.Is(err, streams.ErrParam) || errors.Is(err, streams.ErrUnknownGenerator) || errors.Is(err, streams.ErrOption) {
			return exitUsage
		}
		return exitError
	}
	set := map[string]bool{} // the flags given
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if f.experiment != "" {
		return runExperiment(f.experiment, set, f.seed, f.repeats, f.window, f.out, f.dataDir, args, stdout, stderr, fail)
	}
	if err := flagsApply(set, f.topic != "", f.keyedFlag); err != nil {
		return fail(err)
	}
	var err error
	if f.topic != "" || f.keyedFlag {
		err = keyedBacktest(&f, set, fs.Args(), stdout, stderr)
	} else {
		err = streamBacktest(&f, fs.Args(), stdout, stderr)
	}
	if err != nil {
		return fail(err)
	}
	return exitOK
}

// backtestFlags are the backtest command's flags.
type backtestFlags struct {
	data          string
	format        string
	dim           int
	hashBits      int
	label         string
	positive      string
	negative      string
	header        bool
	labelFile     string
	names         string
	paramsFlag    string
	seed          uint64
	repeats       int
	target        float64
	window        int
	bias          bool
	standardize   bool
	out           string
	listGen       bool
	experiment    string
	dataDir       string
	brokers       string
	topic         string
	labelsTopic   string
	labelsData    string
	from          string
	to            string
	keyedFlag     bool
	keys          int
	keyCol        string
	labelsDelay   int
	partitions    int
	population    string
	learnFrom     string
	sharedAcross  bool
	partitioner   string
	queryScale    float64
	quiet         bool
	detectorsFlag string
	cooldown      int64
	minRise       float64
}

// register defines the flags on fs.
func (f *backtestFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.data, "data", "", "data: a CSV or ARFF file (.gz read transparently) or synth:NAME?k=v&... (see -list-generators)")
	fs.StringVar(&f.format, "format", "auto", "file format: auto (by extension: .csv/.txt → csv, .arff → arff, .jsonl → jsonl), csv, arff or jsonl")
	fs.IntVar(&f.dim, "dim", 0, "jsonl: length of dense \"x\" inputs")
	fs.IntVar(&f.hashBits, "hash-bits", 0, "jsonl: hash named \"features\" into 2^k buckets")
	fs.StringVar(&f.label, "label", "", "label column: header name, 1-based index, first or last (required for labeled files)")
	fs.StringVar(&f.positive, "positive", "", "label value that means +1 (required with -label or -label-file)")
	fs.StringVar(&f.negative, "negative", "", "label value that means -1; when set, any other value is an error")
	fs.BoolVar(&f.header, "header", false, "the CSV file's first row names the columns")
	fs.StringVar(&f.labelFile, "label-file", "", "labels one per line in a separate file, row for row")
	fs.StringVar(&f.names, "learners", "", "comma-separated learners to compare (see 'consumer learners')")
	fs.StringVar(&f.paramsFlag, "params", "", `JSON object of parameters per learner, e.g. {"lasec":{"c":50},"swin":{"randomized":true}}`)
	fs.Uint64Var(&f.seed, "seed", 1, "seed: learners' RNG streams; generators draw stream seed+repeat")
	fs.IntVar(&f.repeats, "repeats", 1, "repeat with seeds seed..seed+N-1 and report means with 95% confidence intervals")
	fs.Float64Var(&f.target, "query-rate-target", 0, "calibrate each sampler's query parameter to this query rate (0 = off)")
	fs.IntVar(&f.window, "window", 500, "window of labeled events for windowed accuracy")
	fs.BoolVar(&f.bias, "bias", false, "append a constant feature 1, so that linear learners can learn a threshold away from the origin")
	fs.BoolVar(&f.standardize, "standardize", false, "z-score every input by the running statistics of the inputs before it (per key with -keyed and topic backtests; the service's DRIFTSTREAM_STANDARDIZE)")
	fs.StringVar(&f.out, "out", "", "output directory for summary.json, curve.csv, accuracy.svg and accuracy.png")
	fs.BoolVar(&f.listGen, "list-generators", false, "list the built-in generators and their parameters, then exit")
	fs.StringVar(&f.experiment, "experiment", "", "run a paper reproduction by name (list: show them); replaces -data and -learners")
	fs.StringVar(&f.dataDir, "data-dir", defaultDataDir(), "with -experiment: the shared data directory ($DRIFTSTREAM_DATA)")
	// Backtests through the service's own pipeline (per key).
	fs.StringVar(&f.brokers, "brokers", "", "topic backtest: Kafka bootstrap brokers, comma-separated host:port (TLS and SASL from the service's DRIFTSTREAM_TLS*/SASL* environment)")
	fs.StringVar(&f.topic, "topic", "", "topic backtest: the events topic to replay (read without a consumer group, never committed)")
	fs.StringVar(&f.labelsTopic, "labels-topic", "", "topic backtest: a co-partitioned labels topic")
	fs.StringVar(&f.labelsData, "labels-data", "", "with -keyed and a JSONL -data: the labels that came later, a JSONL file of label records ({\"id\",\"label\",\"ts\"} and the -key field), merged with the events by \"ts\" as the service merges DRIFTSTREAM_LABELS_TOPIC with the events topic (every line of both files needs its key and ts; cmd/producer's replay -labels-file writes the two topics)")
	fs.StringVar(&f.from, "from", "", "topic backtest: start of the range in every partition: an offset or an RFC 3339 time (default: the first offset)")
	fs.StringVar(&f.to, "to", "", "topic backtest: end of the range (exclusive): an offset or an RFC 3339 time (default: the end when the backtest starts)")
	fs.BoolVar(&f.keyedFlag, "keyed", false, "replay -data through the service's pipeline, one learner per key, as the producer would write it to a topic")
	fs.IntVar(&f.keys, "keys", 1, "with -keyed: spread events without a key column over this many keys (1: one learner for the whole stream; synth:...&keys=N says the same)")
	fs.StringVar(&f.keyCol, "key", "", "with -keyed: the CSV column or JSONL field holding the entity key")
	fs.IntVar(&f.labelsDelay, "labels-delay", 0, "with -keyed: send each label as a label record this many events after its event (0: inline)")
	fs.IntVar(&f.partitions, "partitions", 1, "with -keyed: partitions of the topic the data would be written to")
	fs.StringVar(&f.population, "population", keyed.PopulationOff, "a population model per partition (the service's DRIFTSTREAM_POPULATION): off, additive (a shared part each key's prediction adds to its own), mixture or on (a learner that seeds new keys, followed per key by a weighted majority), or a learner of -learners (its runs alone keep a mixture)")
	fs.BoolVar(&f.sharedAcross, "shared-across-partitions", false, "-keyed (with -partitions) and topic backtests, population additive: one shared part across partitions, each partition reading the others' records (the service's DRIFTSTREAM_SHARED_ACROSS_PARTITIONS)")
	fs.StringVar(&f.learnFrom, "learn-from", keyed.LearnAll, "-keyed and topic backtests: which labels teach a key, all or queried (the service's DRIFTSTREAM_LEARN_FROM); single-stream backtests and reproductions run the papers' protocol, queried")
	fs.StringVar(&f.partitioner, "partitioner", topics.DefaultPartitioner, "with -keyed: the producer's key → partition hash that deals the keys over -partitions (cmd/producer's -partitioner): "+strings.Join(topics.Partitioners, ", "))
	fs.Float64Var(&f.queryScale, "query-scale", 1, "-keyed and topic backtests: margin rule b/(b+|score|) for learners without a query rule (the service's DRIFTSTREAM_QUERY_SCALE)")
	fs.BoolVar(&f.quiet, "q", false, "no progress lines on stderr")
	fs.StringVar(&f.detectorsFlag, "detectors", "", `drift detectors: a JSON list of {"detector","signal","params"}, [] for none, or "all" (every detector on every signal it can watch). -keyed and topic backtests: run per key as the service runs them (default: the service's DRIFTSTREAM_DETECTORS) and write alerts-LEARNER.jsonl; a single stream: scored against the generator's known drift points`)
	fs.Int64Var(&f.cooldown, "alert-cooldown", keyed.DefaultAlertCooldown, "a key's events without a detection after which its open drift incident closes (the service's DRIFTSTREAM_ALERT_COOLDOWN); detections while it is open raise no alert. A single stream scores each detector with an incident of its own, side by side")
	fs.Float64Var(&f.minRise, "alert-min-rise", keyed.DefaultAlertMinRise, "least rise of a detection's signal from its reference window to its recent one for it to alert (the service's DRIFTSTREAM_ALERT_MIN_RISE); 0: any")
}

// keyedBacktest replays a file (-keyed) or a topic range (-topic) through
// the service's pipeline, one learner per key.
func keyedBacktest(f *backtestFlags, set map[string]bool, extra []string, stdout, stderr io.Writer) error {
	switch {
	case len(extra) > 0:
		return usageError{fmt.Errorf("unexpected arguments %q", extra)}
	case f.out == "":
		return usageError{errors.New("-out is required: the directory for the report")}
	case (f.dim > 0) == (f.hashBits > 0) && f.topic != "":
		return usageError{errors.New("a topic backtest needs exactly one of -dim (dense \"x\") and -hash-bits (named \"features\")")}
	case f.topic != "" && (f.brokers == "" || f.data != "" || f.keyedFlag):
		return usageError{errors.New("-topic needs -brokers, and excludes -data and -keyed")}
	case f.topic == "" && f.data == "":
		return usageError{errors.New("-keyed needs -data: a file or synth:NAME?k=v")}
	case f.keys < 1 || f.labelsDelay < 0 || f.partitions < 1 || f.queryScale < 0:
		return usageError{errors.New("-keys and -partitions must be ≥ 1, -labels-delay and -query-scale ≥ 0")}
	case f.labelsData != "" && (f.topic != "" || streams.IsSynth(f.data) || f.keyCol == "" || f.labelsDelay > 0 || f.keys > 1):
		return usageError{errors.New("-labels-data goes with a keyed JSONL -data file and its -key field; the files say where labels are, so not with -labels-delay or -keys")}
	}
	var specs []backtest.Spec
	var err error
	dets := config.DefaultDetectors()
	if f.names == "" { // what the service would have done: its configuration
		svc, err := serviceSettings(set, f, stderr)
		if err != nil {
			return err
		}
		specs, dets = svc.specs, svc.detectors
	} else if specs, err = learnerSpecs(f.names, f.paramsFlag); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if set["detectors"] {
		if dets, err = detectorSpecs(f.detectorsFlag); err != nil {
			return err
		}
	}
	if f.cooldown < 1 {
		return usageError{fmt.Errorf("-alert-cooldown %d: must be ≥ 1", f.cooldown)}
	}
	if f.minRise < 0 || f.minRise >= 1 {
		return usageError{fmt.Errorf("-alert-min-rise %v: must be in [0, 1)", f.minRise)}
	}
	if _, err := topics.Balancer(f.partitioner); err != nil {
		return usageError{fmt.Errorf("-partitioner: %w", err)}
	}
	if err := populationApplies(f.population, specs); err != nil {
		return err
	}
	k := keyedRun{specs: specs, seed: f.seed, dim: f.dim, hashBits: f.hashBits, messages: backtest.MessageOptions{Keys: f.keys, LabelsDelay: f.labelsDelay, Partitioner: f.partitioner},
		partitions: f.partitions, queryScale: f.queryScale, standardize: f.standardize, population: f.population, learnFrom: f.learnFrom, sharedAcross: f.sharedAcross, detectors: dets, cooldown: f.cooldown, minRise: minRise(f.minRise), out: f.out, quiet: f.quiet}
	if f.topic != "" {
		if k.input, err = topicInput(ctx, f.brokers, f.topic, f.labelsTopic, f.from, f.to); err != nil {
			return err
		}
	} else {
		spec := f.data
		if streams.IsSynth(spec) {
			var n int
			if spec, n, err = synthKeys(spec); err != nil {
				return err
			}
			if n > 0 {
				k.messages.Keys = n
			}
		}
		if f.labelsData != "" {
			if k.files, k.dim, err = twoFiles(f); err != nil {
				return err
			}
		} else if k.data, err = dataSource(spec, f.format, streams.CSVOptions{Header: f.header, Label: f.label, LabelFile: f.labelFile, Key: f.keyCol,
			Labels: streams.LabelMap{Positive: f.positive, Negative: f.negative}}, streams.JSONLOptions{Dim: f.dim, HashBits: f.hashBits, KeyField: f.keyCol}, f.bias, f.seed); err != nil {
			return err
		}
		if k.dim == 0 && k.hashBits == 0 {
			_, d, err := k.data(ctx, 0)
			if err != nil {
				return err
			}
			k.dim = d
		}
	}
	if err := k.run(ctx, stdout, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote the report to %s\n", f.out)
	return nil
}

// twoFiles is the events file -data and the labels file -labels-data, both
// JSONL with the -key field, and the dimension of the inputs (-bias's
// constant included).
func twoFiles(f *backtestFlags) (backtest.TwoFiles, int, error) {
	if f.format != "auto" && f.format != "jsonl" {
		return backtest.TwoFiles{}, 0, usageError{fmt.Errorf("-labels-data: the files are JSONL, not -format %s", f.format)}
	}
	opts := streams.JSONLOptions{Dim: f.dim, HashBits: f.hashBits, KeyField: f.keyCol}
	files := backtest.TwoFiles{
		Events: func() (streams.Source, error) {
			src, err := streams.OpenJSONL(f.data, opts)
			if err == nil && f.bias {
				src = streams.WithBias(src)
			}
			return src, err
		},
		Labels: func() (streams.Source, error) { return streams.OpenJSONL(f.labelsData, opts) },
	}
	for _, open := range []func() (streams.Source, error){files.Events, files.Labels} { // both readable, up front
		src, err := open()
		if err != nil {
			return files, 0, err
		}
		if c, ok := src.(io.Closer); ok {
			c.Close()
		}
	}
	if f.hashBits > 0 {
		return files, f.dim, nil // the vectorizer hashes
	}
	src, _ := files.Events()
	dim := src.Dim()
	if c, ok := src.(io.Closer); ok {
		c.Close()
	}
	return files, dim, nil
}

// streamBacktest replays a file or generator as one stream through each of
// -learners, -repeats times, and reports their curves (and detection scores
// with -detectors).
func streamBacktest(f *backtestFlags, extra []string, stdout, stderr io.Writer) error {
	switch {
	case len(extra) > 0:
		return usageError{fmt.Errorf("unexpected arguments %q", extra)}
	case f.data == "":
		return usageError{errors.New("-data is required: a file or synth:NAME?k=v")}
	case f.names == "":
		return usageError{fmt.Errorf("-learners is required; valid: %s", strings.Join(learners.Names(), ", "))}
	case f.out == "":
		return usageError{errors.New("-out is required: the directory for the report")}
	case f.repeats < 1:
		return usageError{fmt.Errorf("-repeats %d: must be ≥ 1", f.repeats)}
	case f.target < 0 || f.target >= 1:
		return usageError{fmt.Errorf("-query-rate-target %v: must be in (0, 1), or 0 for off", f.target)}
	case f.window < 1:
		return usageError{fmt.Errorf("-window %d: must be ≥ 1", f.window)}
	}
	specs, err := learnerSpecs(f.names, f.paramsFlag)
	if err != nil {
		return err
	}
	for i := range specs {
		specs[i].Standardize = f.standardize
	}
	if err := populationApplies(f.population, specs); err != nil {
		return err
	}
	src, err := dataSource(f.data, f.format, streams.CSVOptions{Header: f.header, Label: f.label, LabelFile: f.labelFile,
		Labels: streams.LabelMap{Positive: f.positive, Negative: f.negative}}, streams.JSONLOptions{Dim: f.dim, HashBits: f.hashBits}, f.bias, f.seed)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The service's own pipeline, one key (as in the paper reproductions).
	dets, err := detectorSpecs(f.detectorsFlag)
	if err != nil {
		return err
	}
	var drifts []int
	if len(dets) > 0 {
		if drifts, err = driftPoints(f.data); err != nil {
			return err
		}
	}
	res, err := backtest.Compare(ctx, backtest.Config{Name: f.data, Data: src, Learners: specs, Seed: f.seed, Repeats: f.repeats,
		QueryRateTarget: f.target, Pass: backtest.PipelinePassWith(backtest.PipelineOptions{Detectors: dets, Cooldown: f.cooldown, MinRise: minRise(f.minRise), Population: f.population}), Options: backtest.Options{Window: f.window, Progress: progressTo(f.quiet, stderr)}})
	if err != nil {
		return err
	}
	if err := report(f.out, res, stdout, stderr); err != nil {
		return err
	}
	if len(dets) > 0 {
		if err := reportDetection(f.out, drifts, res, dets, stdout); err != nil {
			return err
		}
	}
	return nil
}

// populationApplies checks -population against the learners run.
func populationApplies(population string, specs []backtest.Spec) error {
	switch population {
	case keyed.PopulationOff, keyed.PopulationAdditive, keyed.PopulationMixture, "on":
		return nil
	}
	if !slices.ContainsFunc(specs, func(s backtest.Spec) bool { return s.Name == population }) {
		return usageError{fmt.Errorf("-population %s: off, additive, mixture, on, or one of -learners", population)}
	}
	return nil
}

// report writes the files and plot and prints one line per learner.
func report(out string, res backtest.Result, stdout, stderr io.Writer) error {
	if err := backtest.WriteFiles(out, res); err != nil {
		return err
	}
	if err := backtest.Plot(out, res); err != nil {
		return err
	}
	for _, ls := range res.Summary.Learners {
		fmt.Fprintf(stdout, "%-26s accuracy %.4f [%.4f, %.4f]  mistakes %.1f  query rate %.3f  label requests %.3f  %.0f events/s\n",
			ls.Name, ls.Accuracy, ls.AccuracyCI.Lo, ls.AccuracyCI.Hi, ls.Mistakes, ls.QueryRate, ls.RequestRate, ls.EventsPerSec)
	}
	fmt.Fprintf(stderr, "wrote %s\n", filepath.Join(out, "summary.json"))
	return nil
}

// The flags of each kind of backtest besides the common ones; a flag set for
// another kind is an error, never silently ignored.
var (
	commonFlags = []string{"learners", "params", "seed", "out", "q", "standardize", "detectors", "alert-cooldown", "alert-min-rise"}
	streamFlags = []string{"data", "format", "dim", "hash-bits", "label", "positive", "negative", "header", "label-file", "bias"}
	modeFlags   = map[string][]string{
		"single-stream": slices.Concat(streamFlags, []string{"repeats", "query-rate-target", "window", "list-generators", "population"}),
		"-keyed":        slices.Concat(streamFlags, []string{"keyed", "keys", "key", "labels-delay", "labels-data", "partitions", "partitioner", "query-scale", "population", "learn-from", "shared-across-partitions"}),
		"topic":         {"brokers", "topic", "labels-topic", "from", "to", "dim", "hash-bits", "query-scale", "population", "learn-from", "shared-across-partitions"},
	}
)

// flagsApply refuses a flag that the backtest's kind does not use
// (-experiment checks its own).
func flagsApply(set map[string]bool, topic, keyed bool) error {
	mode := "single-stream"
	switch {
	case set["experiment"]:
		return nil
	case topic:
		mode = "topic"
	case keyed:
		mode = "-keyed"
	}
	for _, f := range slices.Sorted(maps.Keys(set)) { // the first by name, every time
		if !slices.Contains(commonFlags, f) && !slices.Contains(modeFlags[mode], f) {
			return usageError{fmt.Errorf("-%s does not apply to a %s backtest", f, mode)}
		}
	}
	return nil
}

// runExperiment runs a reproduction; only -seed, -repeats, -window and -out apply.
func runExperiment(name string, set map[string]bool, seed uint64, repeats, window int, out, dataDir string, args []string, stdout, stderr io.Writer, fail func(error) int) int {
	e, err := experiments.Lookup(name)
	if err != nil {
		return fail(usageError{err})
	}
	for _, f := range slices.Sorted(maps.Keys(set)) { // the first by name, every time
		switch f {
		case "experiment", "seed", "repeats", "window", "out", "data-dir":
		default:
			return fail(usageError{fmt.Errorf("-%s does not apply to -experiment (it fixes data and learners); allowed: -seed, -repeats, -window, -out", f)})
		}
	}
	if out == "" {
		return fail(usageError{errors.New("-out is required: the directory for the report")})
	}
	if !set["repeats"] {
		repeats = 0 // the experiment's own count
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	command := "go run ./cmd/consumer backtest " + strings.Join(args, " ")
	if e.Table != nil {
		table, err := e.Table(ctx, e.Learners, dataDir, seed, func(s string) { fmt.Fprintln(stderr, s) })
		if err != nil {
			return fail(err)
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fail(err)
		}
		fmt.Fprint(stdout, table)
		if err := os.WriteFile(filepath.Join(out, "experiment.md"), []byte(e.TableMarkdown(table, command)), 0o644); err != nil {
			return fail(err)
		}
		return exitOK
	}
	e, tuning, err := e.Tuned(ctx, seed, repeats, dataDir, backtest.Options{Progress: stderr})
	if err != nil {
		return fail(err)
	}
	fmt.Fprint(stdout, tuning)
	res, err := backtest.Compare(ctx, e.Config(seed, repeats, dataDir, backtest.Options{Window: window, Progress: stderr}))
	if err != nil {
		return fail(err)
	}
	if err := report(out, res, stdout, stderr); err != nil {
		return fail(err)
	}
	md := e.Markdown(res, command, tuning)
	if err := os.WriteFile(filepath.Join(out, "experiment.md"), []byte(md), 0o644); err != nil {
		return fail(err)
	}
	return exitOK
}

// learnerSpecs parses -learners and -params, checking every name.
func learnerSpecs(names, params string) ([]backtest.Spec, error) {
	per := map[string]json.RawMessage{}
	if params != "" {
		if err := json.Unmarshal([]byte(params), &per); err != nil {
			return nil, usageError{fmt.Errorf("-params must be a JSON object keyed by learner name: %v", err)}
		}
	}
	var specs []backtest.Spec
	seen := map[string]bool{}
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		if _, err := learners.Lookup(n); err != nil {
			return nil, err
		}
		if seen[n] {
			return nil, usageError{fmt.Errorf("-learners lists %s twice", n)}
		}
		seen[n] = true
		specs = append(specs, backtest.Spec{Name: n, Params: per[n]})
	}
	for _, n := range slices.Sorted(maps.Keys(per)) {
		if !seen[n] {
			return nil, usageError{fmt.Errorf("-params has parameters for %s, which is not in -learners", n)}
		}
	}
	return specs, nil
}

// dataSource returns the loader for -data: a generator re-seeded per repeat,
// or a file read once.
// With bias, every input gets a constant feature 1 appended.
func dataSource(data, format string, csvOpts streams.CSVOptions, jsonlOpts streams.JSONLOptions, bias bool, seed uint64) (backtest.Data, error) {
	withBias := func(src streams.Source) streams.Source {
		if bias {
			return streams.WithBias(src)
		}
		return src
	}
	if streams.IsSynth(data) {
		if _, err := streams.OpenSynth(data, 0); err != nil { // validate up front
			return nil, err
		}
		return backtest.SynthData(data, seed, withBias), nil
	}
	if format == "auto" {
		switch ext := strings.ToLower(strings.TrimSuffix(data, ".gz")); {
		case strings.HasSuffix(ext, ".csv"), strings.HasSuffix(ext, ".txt"):
			format = "csv"
		case strings.HasSuffix(ext, ".arff"):
			format = "arff"
		case strings.HasSuffix(ext, ".jsonl"), strings.HasSuffix(ext, ".ndjson"):
			format = "jsonl"
		default:
			return nil, usageError{fmt.Errorf("cannot tell the format of %s from its name; set -format csv, arff or jsonl", data)}
		}
	}
	var open func() (streams.Source, error)
	switch format {
	case "csv":
		open = func() (streams.Source, error) { return streams.OpenCSV(data, csvOpts) }
	case "arff":
		if csvOpts.Header || csvOpts.LabelFile != "" {
			return nil, usageError{errors.New("-header and -label-file apply to CSV files, not ARFF")}
		}
		open = func() (streams.Source, error) {
			return streams.OpenARFF(data, streams.ARFFOptions{Label: csvOpts.Label, Labels: csvOpts.Labels})
		}
	case "jsonl":
		if csvOpts.Header || csvOpts.LabelFile != "" || csvOpts.Label != "" || csvOpts.Labels.Positive != "" {
			return nil, usageError{errors.New("-header, -label, -positive and -label-file do not apply to JSONL: labels are -1/+1 in the events")}
		}
		open = func() (streams.Source, error) { return streams.OpenJSONL(data, jsonlOpts) }
	default:
		return nil, usageError{fmt.Errorf("-format %q: must be auto, csv, arff or jsonl", format)}
	}
	src, err := open()
	if err != nil {
		return nil, err
	}
	src = withBias(src)
	var cached []streams.Example
	return func(ctx context.Context, _ int) ([]streams.Example, int, error) {
		if cached == nil {
			var err error
			if cached, err = backtest.Load(ctx, src); err != nil {
				return nil, 0, err
			}
		}
		return cached, src.Dim(), nil
	}, nil
}

// defaultDataDir is $DRIFTSTREAM_DATA, else ../shared/data (the layout of a
// checkout next to the shared folder).
func defaultDataDir() string {
	if d := os.Getenv("DRIFTSTREAM_DATA"); d != "" {
		return d
	}
	return filepath.Join("..", "shared", "data")
}

// progressTo is stderr, or nothing with -q.
func progressTo(quiet bool, stderr io.Writer) io.Writer {
	if quiet {
		return nil
	}
	return stderr
}
