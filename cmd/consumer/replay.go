package main

import (
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/config"
	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/topics"
)

// keyedRun is a backtest through the service's own pipeline (backtest.Run):
// per-key learners, the margin rule, pending queries with their TTL, dead
// letters — what the service would have done on the same history.
type keyedRun struct {
	specs    []backtest.Spec
	seed     uint64
	dim      int
	hashBits int
	// Exactly one of input (a topic range, resolved once and read once per
	// learner), data (a file or generator, partitioned as the producer
	// writes it) and files is set.
	input      backtest.Input
	data       backtest.Data
	files      backtest.TwoFiles // events and labels files (-labels-data), set instead of data
	messages   backtest.MessageOptions
	partitions int
	queryScale float64
	// standardize z-scores each key's inputs (pipeline.Config.Standardize).
	standardize bool
	// population is -population: off, on (every learner's own), or the one
	// learner whose runs keep a population model.
	population string
	// learnFrom is -learn-from (pipeline.Config.LearnFrom).
	learnFrom string
	// sharedAcross is -shared-across-partitions
	// (keyed.Settings.SharedAcrossPartitions).
	sharedAcross bool
	// detectors run per key with the key's cooldown, as in the service.
	detectors []keyed.DetectorSpec
	cooldown  int64
	minRise   float64 // keyed.Settings.AlertMinRise
	out       string
	quiet     bool
}

// run replays the history once per learner and writes the reports.
func (k keyedRun) run(ctx context.Context, stdout, stderr io.Writer) error {
	vec, err := topics.NewVectorizer(k.dim, k.hashBits)
	if err != nil {
		return usageError{err}
	}
	var reports []*backtest.Report
	for _, spec := range k.specs {
		in := k.input
		if k.files.Events != nil {
			if in, err = backtest.FromFiles(k.files, k.messages, k.partitions); err != nil {
				return usageError{err}
			}
			if vec, err = topics.NewVectorizer(k.dim, k.hashBits); err != nil {
				return usageError{err}
			}
		} else if in == nil {
			exs, dim, err := k.data(ctx, 0)
			if err != nil {
				return err
			}
			if k.hashBits == 0 && dim != vec.Dim {
				// Dense data brings its dimension (-bias's constant
				// coordinate included): the vectorizer follows it.
				if vec, err = topics.NewVectorizer(dim, 0); err != nil {
					return usageError{err}
				}
			} else if dim != vec.Dim {
				return usageError{fmt.Errorf("the data has dimension %d; set -dim %d", dim, dim)}
			}
			if in, err = backtest.FromExamples(dim, exs, k.messages, k.partitions, false); err != nil {
				return usageError{err}
			}
		}
		name := spec.Label
		if name == "" {
			name = spec.Name
		}
		alerts := &alertLog{}
		cfg := backtest.ReplayConfig{Name: name, Pipeline: pipeline.Config{
			Settings:    keyed.Settings{Learner: spec.Name, Params: spec.Params, Seed: k.seed, Vector: vec, QueryScale: k.queryScale, Standardize: k.standardize, Population: backtest.PopulationOf(k.population, spec.Name), LearnFrom: k.learnFrom, SharedAcrossPartitions: k.sharedAcross, Detectors: k.detectors, AlertCooldown: k.cooldown, AlertMinRise: k.minRise},
			MaxKeyBytes: -1},
			Outputs: alerts.add}
		if !k.quiet {
			cfg.Progress = stderr
		}
		rep, err := backtest.Replay(ctx, cfg, in)
		if err != nil {
			return err
		}
		reports = append(reports, rep)
		if err := alerts.write(filepath.Join(k.out, "alerts-"+name+".jsonl")); err != nil {
			return err
		}
	}
	printKeyed(stdout, reports)
	return writeKeyed(k.out, reports)
}

// printKeyed prints one line per learner: "queries" is the query rate (the
// labels the learners asked for, per event), "requests" the label requests
// emitted per event; "unknown" counts label records
// for events the learner did not ask about (or whose query expired), which
// the service drops too; "dead" counts dead letters.
func printKeyed(w io.Writer, reps []*backtest.Report) {
	fmt.Fprintf(w, "%-22s %9s %9s %9s %8s %7s %8s %9s %8s %6s %7s %21s %10s\n", "learner", "events", "labeled", "delayed", "accuracy", "queries",
		"requests", "unknown", "dead", "keys", "alerts", "key accuracy p10/50/90", "records/s")
	num := func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%.3f", v)
	}
	for _, r := range reps {
		q := r.KeyAccuracy
		spread := "–"
		if q.Keys > 0 {
			spread = fmt.Sprintf("%.3f/%.3f/%.3f", q.P10, q.P50, q.P90)
		}
		fmt.Fprintf(w, "%-22s %9d %9d %9d %8s %7.3f %8.3f %9d %8d %6d %7d %21s %10.0f\n", r.Name, r.Totals.Events, r.Totals.Labeled, r.Totals.DelayedLabeled,
			num(r.Accuracy), r.QueryRate, r.RequestRate, r.Totals.LabelsUnknown, r.Totals.DeadLetters, r.Keys, r.Totals.Alerts, spread, r.RecordsPerSec)
	}
	for _, r := range reps { // accuracy by key size: young keys apart from old ones
		fmt.Fprintf(w, "%-22s by events per key:", r.Name)
		for _, b := range r.ByKeySize {
			acc := math.NaN()
			if b.Accuracy != nil {
				acc = *b.Accuracy
			}
			fmt.Fprintf(w, "  %s %s (%d keys)", b.Name, num(acc), b.Keys)
		}
		fmt.Fprintln(w)
	}
}

// writeKeyed writes summary.json (every report) and keys.csv (every key's
// counters per learner) into dir.
func writeKeyed(dir string, reps []*backtest.Report) error {
	rows := [][]string{{"learner", "key", "partition", "events", "labeled", "mistakes", "queries", "alerts", "accuracy"}}
	for _, r := range reps {
		for _, k := range r.PerKey {
			acc := ""
			if a := k.Accuracy(); !math.IsNaN(a) {
				acc = strconv.FormatFloat(a, 'f', 6, 64)
			}
			rows = append(rows, []string{r.Name, k.Key, strconv.Itoa(k.Partition), strconv.FormatInt(k.Events, 10), strconv.FormatInt(k.Labeled, 10),
				strconv.FormatInt(k.Mistakes, 10), strconv.FormatInt(k.Queries, 10), strconv.FormatInt(k.Alerts, 10), acc})
		}
	}
	if err := backtest.WriteSummary(dir, reps, "keys.csv", rows); err != nil {
		return err
	}
	return plotOverTime(dir, reps)
}

// plotOverTime writes curve.csv and accuracy.svg/.png over event time, over
// every key, when the events carry a "ts".
func plotOverTime(dir string, reps []*backtest.Report) error {
	res := backtest.Result{Summary: backtest.Summary{Data: "accuracy over event time, all keys", Repeats: 1, Window: backtest.Options{}.WindowSize()}}
	rows := [][]string{{"learner", "labeled", "cumulative_mistakes", "window_accuracy", "time"}}
	for _, r := range reps {
		if len(r.OverTime) == 0 {
			return nil
		}
		res.Summary.Events = max(res.Summary.Events, int(r.Totals.Events))
		res.Summary.Learners = append(res.Summary.Learners, backtest.LearnerSummary{Name: r.Name})
		res.Runs = append(res.Runs, []backtest.Run{{Curve: r.OverTime}})
		for _, p := range r.OverTime {
			rows = append(rows, []string{r.Name, strconv.Itoa(p.Event), strconv.Itoa(p.CumMistakes), strconv.FormatFloat(p.WindowAccuracy, 'f', 6, 64),
				p.Time.Format(time.RFC3339Nano)})
		}
	}
	f, err := os.Create(filepath.Join(dir, "curve.csv"))
	if err != nil {
		return err
	}
	if err := csv.NewWriter(f).WriteAll(rows); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return backtest.Plot(dir, res)
}

// topicInput resolves a topic backtest's range.
func topicInput(ctx context.Context, brokers, topic, labelsTopic, from, to string) (backtest.Input, error) {
	fb, err := backtest.ParseBound(from)
	if err != nil {
		return nil, usageError{fmt.Errorf("-from: %v", err)}
	}
	tb, err := backtest.ParseBound(to)
	if err != nil {
		return nil, usageError{fmt.Errorf("-to: %v", err)}
	}
	var bs []string
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			bs = append(bs, b)
		}
	}
	cfg, err := config.Load(flag.NewFlagSet("kafka", flag.ContinueOnError), nil)
	if err != nil {
		return nil, usageError{err}
	}
	// The service's Kafka connection settings (TLS, SASL) and isolation
	// from the DRIFTSTREAM_* environment: a topic backtest reaches any
	// cluster the service reaches and reads what it reads.
	dialer, transport, err := cfg.Kafka()
	if err != nil {
		return nil, usageError{err}
	}
	iso, ok := kafkaread.ParseIsolation(cfg.Isolation)
	if !ok {
		return nil, usageError{fmt.Errorf("DRIFTSTREAM_ISOLATION=%q: use read_committed or read_uncommitted", cfg.Isolation)}
	}
	return backtest.FromTopic(ctx, backtest.TopicRange{Brokers: bs, Dialer: dialer, Transport: transport, Isolation: iso,
		Topic: topic, LabelsTopic: labelsTopic, From: fb, To: tb})
}

// synthKeys takes a keys=N parameter out of a synth: spec (how many keys a
// generated stream is spread over) and returns the spec without it and N
// (0 when absent).
func synthKeys(spec string) (string, int, error) {
	name, query, ok := strings.Cut(spec, "?")
	if !ok {
		return spec, 0, nil
	}
	vals, err := url.ParseQuery(query)
	if err != nil {
		return "", 0, usageError{fmt.Errorf("%s: %v", spec, err)}
	}
	k := vals.Get("keys")
	if k == "" {
		return spec, 0, nil
	}
	n, err := strconv.Atoi(k)
	if err != nil || n < 1 {
		return "", 0, usageError{fmt.Errorf("%s: keys=%s: must be a whole number ≥ 1", spec, k)}
	}
	vals.Del("keys")
	if len(vals) == 0 {
		return name, n, nil
	}
	return name + "?" + vals.Encode(), n, nil
}

// alertLog keeps a replay's drift alerts, each partition's in order.
type alertLog struct {
	mu    sync.Mutex
	parts map[int][][]byte
}

// add is a backtest.ReplayConfig.Outputs: it keeps the alerts among outs.
func (a *alertLog) add(partition int, outs []pipeline.Output) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, o := range outs {
		if o.Kind == pipeline.OutAlert {
			if a.parts == nil {
				a.parts = map[int][][]byte{}
			}
			a.parts[partition] = append(a.parts[partition], slices.Clone(o.Value))
		}
	}
	return nil
}

// write writes the alerts, as the service writes them to its alerts topic,
// one a line, partition by partition.
func (a *alertLog) write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b []byte
	for _, p := range slices.Sorted(maps.Keys(a.parts)) {
		for _, v := range a.parts[p] {
			b = append(append(b, v...), '\n')
		}
	}
	return os.WriteFile(path, b, 0o644)
}
