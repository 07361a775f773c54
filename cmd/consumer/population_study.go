package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
)

// populationVariants are the three ways of learning a keyed stream that the
// population benchmark compares, through the service's pipeline: a learner
// per key alone, one learner for every key (the global model), and a
// learner per key seeded from the partition's population model.
var populationVariants = []string{"per-key", "global", "population"}

// keyBucket is the keys with lo to hi events in the stream.
type keyBucket struct {
	name   string
	lo, hi int
}

// keyBuckets split keys by their number of events in the stream: the
// issue's four, the keys with at most 20 events, and last every key.
var keyBuckets = []keyBucket{{"1–10", 1, 10}, {"11–100", 11, 100}, {"101–1,000", 101, 1000}, {"> 1,000", 1001, 1 << 62}, {"≤ 20", 1, 20}, {"all", 1, 1 << 62}}

// allKeys is the index of the bucket of every key.
const allKeys = 5

// populationRun is one variant's accuracy on one draw, per bucket.
type populationRun struct {
	right, n [allKeys + 1]float64
}

func (r populationRun) accuracy(b int) float64 { return r.right[b] / max(r.n[b], 1) }

// runPopulation is `consumer population`: the three variants on several
// draws of a keyed stream, accuracy per key-frequency bucket with paired
// 95% intervals of the population's gain over the better of the other two.
func runPopulation(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("population", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "synth:population?T=100000&keys=5000&zipf=1.1", "a keyed generator (its examples carry their keys)")
	learnerList := fs.String("learners", "perceptron,lasec-ss", "learners, comma-separated")
	seeds := fs.Int("seeds", 5, "draws of the stream (seeds first-seed, first-seed+1, ...)")
	first := fs.Uint64("first-seed", 11, "the first draw's seed")
	out := fs.String("out", "", "directory for population.md (optional)")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fail := failer("population", stderr)
	if fs.NArg() > 0 || *seeds < 2 {
		return fail(errors.New("-seeds ≥ 2 (the intervals are over draws), no arguments"), exitUsage)
	}
	ctx := context.Background()
	var table strings.Builder
	fmt.Fprintf(&table, "keyed backtests through the service's pipeline: %s, %d draws (seeds %d–%d); accuracy per bucket of keys by their events in the stream (keys, events of the first draw); gain = population − the better of per-key and global, mean over draws with its paired 95%% interval\n",
		*data, *seeds, *first, *first+uint64(*seeds)-1)
	for _, learner := range strings.Split(*learnerList, ",") {
		runs := map[string][]populationRun{}
		var sizes [allKeys + 1]float64
		var keysIn [allKeys + 1]int
		for s := range *seeds {
			seed := *first + uint64(s)
			src, err := streams.OpenSynth(*data, seed)
			if err != nil {
				return fail(err, exitUsage)
			}
			exs, err := backtest.Load(ctx, src)
			if err != nil {
				return fail(err, exitError)
			}
			counts := map[string]int{}
			for _, ex := range exs {
				if ex.Key == "" {
					return fail(fmt.Errorf("%s: examples without keys: use a keyed generator", *data), exitUsage)
				}
				counts[ex.Key]++
			}
			for _, variant := range populationVariants {
				if !*quiet {
					fmt.Fprintf(stderr, "population: %s, seed %d, %s\n", learner, seed, variant)
				}
				r, err := populationPass(ctx, learner, variant, src.Dim(), seed, exs, counts)
				if err != nil {
					return fail(err, exitError)
				}
				runs[variant] = append(runs[variant], r)
				if s == 0 && variant == "per-key" {
					sizes = r.n
					for _, c := range counts {
						for b, kb := range keyBuckets {
							if c >= kb.lo && c <= kb.hi {
								keysIn[b]++
							}
						}
					}
				}
			}
		}
		buckets := []int{allKeys, 0, 1, 2, 3, 4} // every key first
		fmt.Fprintf(&table, "\n**%s**\n\n| | all keys |", learner)
		for _, b := range buckets[1:] {
			fmt.Fprintf(&table, " %s events |", keyBuckets[b].name)
		}
		table.WriteString("\n|---|")
		for range buckets {
			table.WriteString("---|")
		}
		table.WriteString("\n| keys, events |")
		for _, b := range buckets {
			fmt.Fprintf(&table, " %d, %.0f |", keysIn[b], sizes[b])
		}
		for _, variant := range populationVariants {
			fmt.Fprintf(&table, "\n| %s |", variant)
			for _, b := range buckets {
				acc := make([]float64, len(runs[variant]))
				for i, r := range runs[variant] {
					acc[i] = r.accuracy(b)
				}
				fmt.Fprintf(&table, " %.4f |", backtest.MeanCI(acc).Mean)
			}
		}
		table.WriteString("\n| gain |")
		for _, b := range buckets {
			gains := make([]float64, *seeds)
			for i := range gains {
				gains[i] = runs["population"][i].accuracy(b) - max(runs["per-key"][i].accuracy(b), runs["global"][i].accuracy(b))
			}
			ci := backtest.MeanCI(gains)
			fmt.Fprintf(&table, " %+.4f [%+.4f, %+.4f] |", ci.Mean, ci.Lo, ci.Hi)
		}
		table.WriteString("\n")
	}
	command := "go run ./cmd/consumer population " + strings.Join(args, " ")
	fmt.Fprint(stdout, table.String())
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return fail(err, exitError)
		}
		if err := os.WriteFile(filepath.Join(*out, "population.md"), []byte(table.String()+"\n`"+command+"`\n"), 0o644); err != nil {
			return fail(err, exitError)
		}
	}
	return exitOK
}

// populationPass replays exs (one partition, labels inline) under one
// variant and scores each prediction in its key's bucket.
func populationPass(ctx context.Context, learner, variant string, dim int, seed uint64, exs []streams.Example, counts map[string]int) (populationRun, error) {
	var run populationRun
	vec, err := topics.NewVectorizer(dim, 0)
	if err != nil {
		return run, err
	}
	cfg := pipeline.Config{Settings: keyed.Settings{Learner: learner, Seed: seed, Vector: vec, QueryScale: 1, Population: keyed.PopulationOff}, MaxKeyBytes: -1}
	if variant == "population" {
		cfg.Population = learner
	}
	labels := make(map[string]int, len(exs))
	keyOf := make(map[string]string, len(exs))
	replayed := make([]streams.Example, len(exs))
	for i, ex := range exs {
		id := ex.Key + "/" + ex.ID // unique over keys: the global variant puts them under one
		labels[id], keyOf[id] = ex.Label, ex.Key
		replayed[i] = ex
		replayed[i].ID = id
		if variant == "global" {
			replayed[i].Key = "all"
		}
	}
	in, err := backtest.FromExamples(dim, replayed, backtest.MessageOptions{Keys: 1}, 1, false)
	if err != nil {
		return run, err
	}
	var mu sync.Mutex
	collect := func(_ int, outs []pipeline.Output) error {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range outs {
			if o.Kind != pipeline.OutPrediction {
				continue
			}
			var p topics.Prediction
			if err := json.Unmarshal(o.Value, &p); err != nil {
				return err
			}
			y, ok := labels[p.ID]
			if !ok {
				return fmt.Errorf("a prediction for an event not replayed: %q", p.ID)
			}
			c := counts[keyOf[p.ID]]
			for b, kb := range keyBuckets {
				if c >= kb.lo && c <= kb.hi {
					run.n[b]++
					if p.Label == y {
						run.right[b]++
					}
				}
			}
		}
		return nil
	}
	if _, err := backtest.Replay(ctx, backtest.ReplayConfig{Name: "population", Pipeline: cfg, Outputs: collect}, in); err != nil {
		return run, err
	}
	return run, nil
}
