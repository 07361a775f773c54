package service

import (
	"fmt"
	"testing"
	"time"

	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// sample is the value of the series name{labels} (name/value pairs) that g
// gathers; the test fails when the series is not there.
func sample(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	v, ok := lookup(t, g, name, labels...)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// lookup is sample, reporting whether the series exists.
func lookup(t testing.TB, g prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if len(got) != len(labels)/2 {
				continue
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// Every labelled counter's series is there from the start, at 0 — before
// any event, error or alert — so that dashboards and increase() alerts read
// 0 on a healthy member, not "No data".
func TestCounterSeriesExistFromTheStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.watchDetectors([]keyed.DetectorSpec{{Detector: "adwin", Signal: "mistakes"}, {Detector: "adwin", Signal: "queries"}})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"driftstream_dead_letters_total":       len(pipeline.Reasons),
		"driftstream_outputs_refused_total":    2 * len(pipeline.OutputKinds),
		"driftstream_partition_errors_total":   len(pipeline.Steps),
		"driftstream_retries_total":            len(pipeline.Steps),
		"driftstream_drift_alerts_total":       2,
		"driftstream_events_total":             1,
		"driftstream_labels_unknown_total":     1,
		"driftstream_partitions_resumed_total": 1,
		"driftstream_ready":                    1, // 0 until a service is attached and ready
	}
	got := map[string]int{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			if v := s.GetCounter().GetValue() + s.GetGauge().GetValue(); v != 0 && f.GetName() != "driftstream_build_info" {
				t.Errorf("%s %v = %v at the start", f.GetName(), s.GetLabel(), v)
			}
		}
		got[f.GetName()] = len(f.GetMetric())
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s: %d series at the start, want %d", name, got[name], n)
		}
	}
}

// The scraped metrics read the partitions' own counters at scrape time:
// what the service's Totals say, the windowed accuracy of each partition's
// last 1000 labeled events, and, with a population model, whose label the
// keys' mixtures made.
// An additive model's keys follow neither expert: the mixture's series are
// absent there.
func TestScrapedMetricsReadThePartitions(t *testing.T) {
	for _, model := range []string{keyed.PopulationOff, "perceptron", keyed.PopulationAdditive} {
		population := model == "perceptron" // the mixture, by the learner's name
		t.Run(model, func(t *testing.T) {
			addr := cluster(t)
			cfg := testConfig(t, addr, "g-scrape")
			cfg.Pipeline.Learner, cfg.Pipeline.Params = "perceptron", nil
			cfg.Pipeline.Population = model
			reg := prometheus.NewRegistry()
			var err error
			if cfg.Metrics, err = NewMetrics(reg); err != nil {
				t.Fatal(err)
			}
			if _, ok := lookup(t, reg, "driftstream_window_accuracy", "partition", "0"); ok {
				t.Fatal("a window accuracy before the service runs")
			}
			s, stop := started(t, cfg)
			defer stop()
			produce(t, addr, 1, 1300)
			eventuallyTotals(t, s, 1300)
			tot := s.Totals()
			for name, want := range map[string]int64{"driftstream_events_total": tot.Events, "driftstream_predictions_total": tot.Predictions,
				"driftstream_labeled_total": tot.Labeled, "driftstream_mistakes_total": tot.Mistakes, "driftstream_label_queries_total": tot.Queries} {
				if got := sample(t, reg, name); got != float64(want) {
					t.Errorf("%s = %v, Totals say %d", name, got, want)
				}
			}
			var labeled, populationPredictions float64
			running := s.running()
			if len(running) != partitions {
				t.Fatalf("%d partitions run, want %d", len(running), partitions)
			}
			for _, st := range running {
				p, snap := st.p, st.snapshot()
				if snap.WindowLabeled > 0 {
					labeled += float64(snap.Totals.Labeled)
					if got := sample(t, reg, "driftstream_window_accuracy", "partition", part(p)); got != snap.WindowAccuracy || snap.WindowLabeled != min(int(snap.Totals.Labeled), pipeline.WindowSize) {
						t.Errorf("partition %d: window_accuracy %v over %d labeled, its snapshot %+v", p, got, snap.WindowLabeled, snap)
					}
				}
				_, hasShare := lookup(t, reg, "driftstream_population_share", "partition", part(p))
				if hasShare != (population && snap.PopulationPredictions > 0) {
					t.Errorf("partition %d: population_share present %v with population %v, %d predictions", p, hasShare, population, snap.PopulationPredictions)
				}
				if population && snap.PopulationPredictions > 0 {
					populationPredictions++
					w := sample(t, reg, "driftstream_population_weight", "partition", part(p))
					if w <= 0 || w >= 1 || w != snap.PopulationWeight {
						t.Errorf("partition %d: population_weight %v, snapshot %v", p, w, snap.PopulationWeight)
					}
				}
			}
			if labeled != float64(tot.Labeled) {
				t.Errorf("the partitions' snapshots count %v labeled, Totals %d", labeled, tot.Labeled)
			}
			pop, popOK := lookup(t, reg, "driftstream_population_predictions_total", "follows", "population")
			own, ownOK := lookup(t, reg, "driftstream_population_predictions_total", "follows", "own")
			switch {
			case !population && (popOK || ownOK):
				t.Errorf("population_predictions_total with population %s", model)
			case population && (pop+own != float64(tot.Predictions) || pop == 0 || populationPredictions == 0):
				t.Errorf("population_predictions_total: %v population + %v own, %d predictions", pop, own, tot.Predictions)
			}
		})
	}
}

// eventuallyTotals waits until s has processed and scored n events.
func eventuallyTotals(t *testing.T, s *Service, n int64) {
	t.Helper()
	eventually(t, 60*time.Second, func() bool { t := s.Totals(); return t.Events >= n && t.Labeled >= n },
		func() string { return fmt.Sprintf("%+v", s.Totals()) })
}
