package backtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
)

// PipelinePass is the prequential pass of every backtest and paper
// reproduction, run through the service's pipeline: the events are one
// key's history on one partition (a stream without keys, as the papers run
// it), labels inline or as the source's own label records. Each event is
// predicted and decided, a labeled one scored, and the learner taught the
// labels it asks for — by the code the service runs. The records stay in
// memory (no JSON: pipeline.Record's Decoded) and the learner is seeded
// from seed alone (pipeline.Config's Unkeyed), as a learner outside the
// pipeline would be. Run.Expected sums each scored prediction's
// probability of a mistake (pipeline.Outcome's Expected); Run.Queries
// counts the labels the learner asked for, Run.Requests the label requests
// the service would emit.
func PipelinePass(ctx context.Context, spec Spec, events []streams.Example, dim int, seed uint64, opts Options) (Run, error) {
	return PipelinePassWith(PipelineOptions{})(ctx, spec, events, dim, seed, opts)
}

// PipelineOptions are what a single-stream pass runs beside the key's learner.
type PipelineOptions struct {
	// Detectors run on the stream's key, each with an incident of its own
	// (scored side by side), closed after Cooldown events without a
	// detection and opened by a rise of MinRise (0: the defaults;
	// keyed.NoMinRise: any); Run.Alerts has their alerts, at the event
	// index of the event or label that raised them (events' ids, when they
	// are indexes as generators number them, else their offsets).
	Detectors []keyed.DetectorSpec
	Cooldown  int64
	MinRise   float64
	// Population is the backtests' -population: off (or empty), on (each
	// learner's own), or the one learner whose runs keep a population
	// model (PopulationOf).
	Population string
}

// PipelinePassWith is PipelinePass with opts.
func PipelinePassWith(opts PipelineOptions) Pass {
	return func(ctx context.Context, spec Spec, events []streams.Example, dim int, seed uint64, o Options) (Run, error) {
		return pass(ctx, spec, events, dim, seed, o, opts)
	}
}

// PopulationOf is pipeline.Config.Population for the runs of learner when
// a backtest's -population is flag: additive or mixture for every learner;
// the learner's own mixture for "on" and for its own name; none otherwise.
func PopulationOf(flag, learner string) string {
	switch flag {
	case keyed.PopulationAdditive, keyed.PopulationMixture:
		return flag
	case "on", learner:
		return learner
	}
	return keyed.PopulationOff
}

func pass(ctx context.Context, spec Spec, events []streams.Example, dim int, seed uint64, opts Options, po PipelineOptions) (Run, error) {
	vec, err := topics.NewVectorizer(dim, 0)
	if err != nil {
		return Run{}, err
	}
	in, err := FromExamples(dim, events, MessageOptions{Keys: 1, InMemory: true}, 1, false)
	if err != nil {
		return Run{}, err
	}
	every, recent := opts.Curve(len(events))
	var times []time.Time // of the events in order, for the curve's time axis
	for _, ex := range events {
		if !ex.LabelRecord {
			times = append(times, ex.Time)
		}
	}
	var run Run
	name := spec.Label
	if name == "" {
		name = spec.Name
	}
	cfg := ReplayConfig{Name: name, Pipeline: pipeline.Config{
		Settings: keyed.Settings{Learner: spec.Name, Params: spec.Params, Seed: seed, Vector: vec, QueryScale: 1,
			MaxPending: len(events) + 1, PendingTTL: int64(len(events)) + 1, MaxPendingBytes: 1 << 40,
			Detectors: po.Detectors, AlertCooldown: po.Cooldown, AlertMinRise: po.MinRise, IncidentPerDetector: true, Standardize: spec.Standardize, Population: PopulationOf(po.Population, spec.Name), Unkeyed: true,
			LearnFrom: keyed.LearnQueried}, // the papers' protocol: a sampler learns the labels it asks for
		MaxKeyBytes: -1},
		Progress: opts.Progress, ProgressEvery: 5 * time.Second}
	var records, seen, mistakes int
	var expected float64
	cfg.Observe = func(_ int, _ *pipeline.Fetched, e pipeline.Effect) {
		i := records // the record's index
		records++
		seen += int(e.Events)
		mistakes += int(e.Mistakes)
		if e.Labeled > 0 { // at most one scored event per record
			recent.Add(e.Outcome.Wrong)
			expected += e.Outcome.Expected
		}
		if sampled(i, len(events), every) && recent.Len() > 0 {
			pt := Point{Event: seen, CumMistakes: mistakes, WindowAccuracy: recent.Value(), WindowLabeled: recent.Len()}
			if pt.Event > 0 {
				pt.Time = times[pt.Event-1]
			}
			run.Curve = append(run.Curve, pt)
		}
	}
	var firstDead string
	cfg.Outputs = func(_ int, outs []pipeline.Output) error {
		for _, o := range outs {
			switch {
			case o.Kind == pipeline.OutDeadLetter && firstDead == "":
				firstDead = o.Headers["error"]
			case o.Kind == pipeline.OutAlert:
				var a topics.DriftAlert
				if err := json.Unmarshal(o.Value, &a); err != nil {
					return fmt.Errorf("an alert the pipeline wrote does not decode: %w", err)
				}
				at, err := strconv.Atoi(a.ID)
				if err != nil {
					at = int(a.Offset)
				}
				if run.Alerts == nil {
					run.Alerts = map[string][]int{}
				}
				k := a.Detector + "/" + a.Signal
				run.Alerts[k] = append(run.Alerts[k], at)
			}
		}
		return nil
	}
	rep, err := Replay(ctx, cfg, in)
	if err != nil {
		return Run{}, fmt.Errorf("%s: %w", name, err)
	}
	t := rep.Totals
	if t.DeadLetters > 0 {
		return Run{}, fmt.Errorf("%s: the pipeline dead-lettered %d records, the first because: %s", name, t.DeadLetters, firstDead)
	}
	run.Events, run.Labeled, run.Mistakes = int(t.Events), int(t.Labeled), int(t.Mistakes)
	// One query rate everywhere: the labels the learner asked for (every
	// one for a learner that learns every label). The label requests the
	// service would emit for unlabeled events are counted apart.
	run.Queries, run.Requests = int(t.Asked), int(t.Queries)
	run.Delayed, run.Unknown = int(t.DelayedLabeled), int(t.LabelsUnknown)
	run.Expected = expected
	run.Seconds = rep.Seconds
	return run, nil
}
