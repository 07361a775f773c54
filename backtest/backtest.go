// Package backtest runs histories — a file, a generator, a range of a Kafka
// topic — through learners prequentially (predict, count the mistake, then
// learn) and reports accuracy, mistakes, queries and speed, with curves over
// time and confidence intervals over repeated seeds. It is the engine of
// `consumer backtest` and of the paper reproductions.
//
// Replay runs a keyed history through the service's own partition loop
// (pipeline.Runner): the same keyed records, partitioned as Kafka
// partitions them, the same workers, the same checkpointing (in memory), so
// that a backtest computes what the service computes, prediction for
// prediction (Messages turns examples into the keyed event messages the
// producer writes, so a file produced to a topic and the same file
// backtested are the same records in the same order). PipelinePass runs one
// unkeyed stream the same way: the pass of Compare, calibration and the
// paper reproductions (TestPassAgreesWithReference holds it to the plain
// prequential loop, randomized learners included).
//
// Files: backtest.go (runs), report.go (Compare, calibration,
// summaries), plot.go, detection.go (scoring alerts against known drifts);
// replay.go (Replay), replayreport.go (its report), input.go and topic.go
// (histories from sources and topic ranges), messages.go (examples as
// keyed messages), pass.go (PipelinePass).
package backtest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"time"

	"github.com/driftstream/driftstream/internal/window"
	"github.com/driftstream/driftstream/streams"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Spec names one learner to evaluate, with its JSON parameters.
type Spec struct {
	Name   string          `json:"name"`
	Params json.RawMessage `json:"params,omitempty"`
	// Label distinguishes two specs of the same learner in reports; defaults to Name.
	Label string `json:"label,omitempty"`
	// Standardize z-scores every input by the running statistics of the
	// inputs before it (learners.Standardizer) before the learner sees it.
	Standardize bool `json:"standardize,omitempty"`
}

// Options configures a run.
type Options struct {
	// Window is the number of recent labeled events in windowed accuracy.
	Window int
	// Points is the number of samples per curve (0: 500).
	Points int
	// Progress, when set, receives a line per learner run and periodic progress.
	Progress io.Writer
}

// Curve returns how many events apart a pass over n events samples its
// curve (Points samples, 500 by default) and the window of labeled outcomes
// its windowed accuracy covers (Window, 500 by default).
func (o Options) Curve(n int) (every int, recent *window.Accuracy) {
	points := o.Points
	if points <= 0 {
		points = 500
	}
	return max(1, n/points), window.New(o.WindowSize())
}

// sampled reports whether a curve over n records, sampled every every
// records, has a point at record i (0-based): records 0, every, 2·every, …
// and the last. Every curve of the package samples by it.
func sampled(i, n, every int) bool { return i%every == 0 || i == n-1 }

// WindowSize is the number of labeled outcomes windowed accuracy covers
// (Window, 500 by default).
func (o Options) WindowSize() int {
	if o.Window <= 0 {
		return 500
	}
	return o.Window
}

// Run is one learner's pass over one stream.
type Run struct {
	Events int // input events seen
	// Delayed counts labels that arrived as label records for an earlier event;
	// Unknown counts label records whose event id was never seen (or already labeled).
	Delayed, Unknown int
	Labeled          int     // events with a label (the ones scored)
	Mistakes         int     // mistakes on labeled events
	Expected         float64 // expected mistakes: pipeline.Outcome's Expected, summed
	// Queries counts the events whose label the learner asked for — every
	// event for a learner that learns every label, its own rule's choices
	// for a sampler: the papers' query rate is Queries/Events, in every
	// pass.
	Queries int
	// Requests counts the label requests the service's pipeline emitted for
	// unlabeled events (the label-queries topic: a sampler's queries, the
	// margin rule's for the others).
	Requests int
	Seconds  float64
	// Curve samples cumulative mistakes and windowed accuracy over time.
	Curve []Point
	// Alerts are the event indexes (0-based) of each drift detector's
	// alerts, by "detector/signal" (passes that run detectors).
	Alerts map[string][]int
}

// Point is one sample of a learning curve.
type Point struct {
	Event          int     `json:"event"`
	CumMistakes    int     `json:"cumulative_mistakes"`
	WindowAccuracy float64 `json:"window_accuracy"`
	// WindowLabeled is how many labeled outcomes WindowAccuracy is over (it
	// fills up to the window size): plots leave out the first, noisiest points.
	WindowLabeled int `json:"window_labeled"`
	// Time is the event time of the Event-th event, zero when the data has none.
	Time time.Time `json:"time,omitzero"`
}

// Accuracy is the share of labeled events predicted right.
func (r Run) Accuracy() float64 {
	if r.Labeled == 0 {
		return math.NaN()
	}
	return 1 - float64(r.Mistakes)/float64(r.Labeled)
}

// QueryRate is the share of events whose label the learner asked for.
func (r Run) QueryRate() float64 {
	if r.Events == 0 {
		return math.NaN()
	}
	return float64(r.Queries) / float64(r.Events)
}

// Load reads a whole source into memory, so that every learner and every
// calibration pass sees exactly the same events.
func Load(ctx context.Context, src streams.Source) ([]streams.Example, error) {
	var out []streams.Example
	for {
		ex, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ex)
	}
}

func (s Spec) label() string {
	if s.Label != "" {
		return s.Label
	}
	return s.Name
}

// Interval is a mean with a 95% confidence interval (Student t over repeats).
type Interval struct {
	Mean float64 `json:"mean"`
	Lo   float64 `json:"ci95_lo"`
	Hi   float64 `json:"ci95_hi"`
}

// PairedDifference is the mean over repeats of learner a's accuracy minus
// learner b's in the same repeat (same draw of the data), with its 95%
// Student-t interval: the comparison a claim about a difference needs.
func (r Result) PairedDifference(a, b int) Interval {
	diffs := make([]float64, 0, len(r.Runs[a]))
	for k := range r.Runs[a] {
		diffs = append(diffs, r.Runs[a][k].Accuracy()-r.Runs[b][k].Accuracy())
	}
	return meanCI(diffs)
}

// MeanCI is the mean of xs with its 95% Student-t interval (a point interval
// for a single value).
func MeanCI(xs []float64) Interval { return meanCI(xs) }

// meanCI returns the mean of xs and its 95% Student-t interval (a point
// interval for a single value).
func meanCI(xs []float64) Interval {
	m := stat.Mean(xs, nil)
	if len(xs) < 2 {
		return Interval{m, m, m}
	}
	se := stat.StdDev(xs, nil) / math.Sqrt(float64(len(xs)))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(len(xs) - 1)}.Quantile(0.975)
	return Interval{m, m - t*se, m + t*se}
}
