package backtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/driftstream/driftstream/pipeline"
	"gonum.org/v1/gonum/stat"
)

// KeyStats are one key's counters over the replay.
type KeyStats struct {
	Key string `json:"key"`
	// Partition is the key's partition: where the service keeps its state.
	Partition int   `json:"partition"`
	Events    int64 `json:"events"`
	Labeled   int64 `json:"labeled"`
	Mistakes  int64 `json:"mistakes"`
	Queries   int64 `json:"queries"`
	Alerts    int64 `json:"alerts"`
}

// Accuracy is the key's share of labeled events predicted right (NaN
// without labels).
func (k KeyStats) Accuracy() float64 {
	if k.Labeled == 0 {
		return math.NaN()
	}
	return 1 - float64(k.Mistakes)/float64(k.Labeled)
}

// Quantiles summarize a per-key figure across keys.
type Quantiles struct {
	Keys                    int     `json:"keys"`
	P10, P25, P50, P75, P90 float64 `json:"-"`
}

// MarshalJSON writes the quantiles under their names (null when no key
// contributes).
func (q Quantiles) MarshalJSON() ([]byte, error) {
	num := func(v float64) any {
		if q.Keys == 0 || math.IsNaN(v) {
			return nil
		}
		return v
	}
	return json.Marshal(map[string]any{"keys": q.Keys, "p10": num(q.P10), "p25": num(q.P25), "p50": num(q.P50), "p75": num(q.P75), "p90": num(q.P90)})
}

func quantiles(vals []float64) Quantiles {
	q := Quantiles{Keys: len(vals)}
	if len(vals) == 0 {
		return q
	}
	slices.Sort(vals)
	at := func(p float64) float64 { return stat.Quantile(p, stat.Empirical, vals, nil) }
	q.P10, q.P25, q.P50, q.P75, q.P90 = at(0.1), at(0.25), at(0.5), at(0.75), at(0.9)
	return q
}

// Report is what the service would have done over the history: the
// workers' counters (the ones its metrics show), and their spread over keys.
type Report struct {
	Name    string          `json:"name"`
	Learner string          `json:"learner"`
	Params  json.RawMessage `json:"params,omitempty"`
	// Totals are the workers' counters summed over partitions.
	Totals pipeline.Totals `json:"totals"`
	// Accuracy is over every labeled event, inline or delayed (NaN: none).
	Accuracy float64 `json:"-"`
	// QueryRate is the share of events whose label the learners asked for
	// (Totals.Asked: every event for a learner that learns every label, a
	// sampler's own choices); RequestRate the label requests emitted for
	// unlabeled events (the label-queries topic) per event.
	QueryRate           float64 `json:"query_rate"`
	RequestRate         float64 `json:"label_request_rate"`
	LabelsPerPrediction float64 `json:"labels_per_prediction"`
	Keys                int     `json:"keys"`
	// KeyAccuracy is the accuracy of keys with at least MinKeyLabels labels.
	KeyAccuracy  Quantiles `json:"key_accuracy"`
	EventsPerKey Quantiles `json:"events_per_key"`
	LabelsPerKey Quantiles `json:"labels_per_key"`
	// ByKeySize is the accuracy of keys grouped by how many events they
	// had (KeySizes): how young keys fare, apart from old ones.
	ByKeySize []SizeBucket `json:"by_key_size"`
	// WorstKeys are the keys with the most mistakes (at most 10).
	WorstKeys     []KeyStats   `json:"worst_keys"`
	Outputs       OutputCounts `json:"-"` // written after accuracy (MarshalJSON)
	Seconds       float64      `json:"seconds"`
	RecordsPerSec float64      `json:"records_per_sec"`
	// PerKey holds every key's counters, sorted by key.
	PerKey []KeyStats `json:"-"`
	// OverTime samples accuracy over event time, over every key: empty when
	// the events carry no "ts".
	OverTime []Point `json:"-"`
}

// KeySizes are the bounds, in events per key, of Report.ByKeySize's
// buckets: 1–10, 11–100, 101–1,000 and over 1,000 events.
var KeySizes = []int64{10, 100, 1000}

// SizeBucket is the accuracy over the keys whose event counts lie in
// [MinEvents, MaxEvents] (MaxEvents 0: no bound).
type SizeBucket struct {
	Name      string `json:"name"`
	MinEvents int64  `json:"min_events"`
	MaxEvents int64  `json:"max_events,omitempty"`
	Keys      int    `json:"keys"`
	Labeled   int64  `json:"labeled"`
	Mistakes  int64  `json:"mistakes"`
	// Accuracy is 1 − Mistakes/Labeled, absent when nothing was labeled.
	Accuracy *float64 `json:"accuracy"`
}

// bySize groups keys into the KeySizes buckets.
func bySize(keys []KeyStats) []SizeBucket {
	out := make([]SizeBucket, len(KeySizes)+1)
	lo := int64(1)
	for i := range out {
		out[i].MinEvents = lo
		if i < len(KeySizes) {
			out[i].MaxEvents = KeySizes[i]
			out[i].Name = fmt.Sprintf("%d-%d", lo, KeySizes[i])
			lo = KeySizes[i] + 1
		} else {
			out[i].Name = fmt.Sprintf(">%d", KeySizes[i-1])
		}
	}
	for _, k := range keys {
		i, _ := slices.BinarySearch(KeySizes, k.Events)
		b := &out[i]
		b.Keys++
		b.Labeled += k.Labeled
		b.Mistakes += k.Mistakes
	}
	for i := range out {
		if out[i].Labeled > 0 {
			a := 1 - float64(out[i].Mistakes)/float64(out[i].Labeled)
			out[i].Accuracy = &a
		}
	}
	return out
}

// overTime merges the partitions' timed outcomes in event-time order and
// samples the cumulative mistakes and the windowed accuracy (the last 500
// outcomes) at curvePoints points.
func overTime(scorers []*scorer) []Point {
	var all []timedOutcome
	for _, s := range scorers {
		all = append(all, s.timed...)
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortStableFunc(all, func(a, b timedOutcome) int { return cmp.Compare(a.at, b.at) })
	every, recent := Options{}.Curve(len(all))
	var out []Point
	mistakes := 0
	for i, o := range all {
		recent.Add(o.wrong)
		if o.wrong {
			mistakes++
		}
		if sampled(i, len(all), every) {
			out = append(out, Point{Event: i + 1, CumMistakes: mistakes, WindowAccuracy: recent.Value(), WindowLabeled: recent.Len(), Time: time.Unix(0, o.at).UTC()})
		}
	}
	return out
}

// MinKeyLabels is the fewest labels a key needs to count in KeyAccuracy.
const MinKeyLabels = 10

// MarshalJSON adds the accuracy (null when undefined) and the output counts.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report
	var acc any
	if !math.IsNaN(r.Accuracy) {
		acc = r.Accuracy
	}
	return json.Marshal(struct {
		*plain
		Accuracy any          `json:"accuracy"`
		Outputs  OutputCounts `json:"outputs"`
	}{(*plain)(r), acc, r.Outputs})
}

func newReport(cfg ReplayConfig, scorers []*scorer, runners []*pipeline.Runner, records int64, took time.Duration) *Report {
	r := &Report{Name: cfg.Name, Learner: cfg.Pipeline.Learner, Params: cfg.Pipeline.Params, Seconds: took.Seconds()}
	for i, s := range scorers {
		r.Totals.Add(runners[i].Snapshot().Totals)
		r.Outputs.Predictions += s.outputs.Predictions
		r.Outputs.Queries += s.outputs.Queries
		r.Outputs.DeadLetters += s.outputs.DeadLetters
		for _, k := range s.keys {
			r.PerKey = append(r.PerKey, *k)
		}
	}
	slices.SortFunc(r.PerKey, func(a, b KeyStats) int { return cmp.Compare(a.Key, b.Key) })
	r.Keys = len(r.PerKey)
	r.OverTime = overTime(scorers)
	r.Accuracy = math.NaN()
	if r.Totals.Labeled > 0 {
		r.Accuracy = 1 - float64(r.Totals.Mistakes)/float64(r.Totals.Labeled)
	}
	if r.Totals.Events > 0 {
		r.QueryRate = float64(r.Totals.Asked) / float64(r.Totals.Events)
		r.RequestRate = float64(r.Totals.Queries) / float64(r.Totals.Events)
	}
	if r.Totals.Predictions > 0 {
		r.LabelsPerPrediction = float64(r.Totals.Labeled) / float64(r.Totals.Predictions)
	}
	var acc, events, labels []float64
	for _, k := range r.PerKey {
		events = append(events, float64(k.Events))
		labels = append(labels, float64(k.Labeled))
		if k.Labeled >= MinKeyLabels {
			acc = append(acc, k.Accuracy())
		}
	}
	r.KeyAccuracy, r.EventsPerKey, r.LabelsPerKey = quantiles(acc), quantiles(events), quantiles(labels)
	r.ByKeySize = bySize(r.PerKey)
	worst := slices.Clone(r.PerKey)
	slices.SortStableFunc(worst, func(a, b KeyStats) int { return cmp.Compare(b.Mistakes, a.Mistakes) })
	r.WorstKeys = worst[:min(10, len(worst))]
	if r.Seconds > 0 {
		r.RecordsPerSec = float64(records) / r.Seconds
	}
	return r
}
