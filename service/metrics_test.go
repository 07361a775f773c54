package service

import (
	"testing"

	"github.com/driftstream/driftstream/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The windowed accuracy covers the last 1000 labeled outcomes only.
func TestWindowAccuracyGauge(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	g := m.partition(3)
	if n := testutil.CollectAndCount(m.windowAccuracy); n != 0 {
		t.Fatalf("%d window_accuracy series before any label: an idle partition must have none, not 0", n)
	}
	for i := 0; i < 1000; i++ {
		g.accuracy(true) // 1000 mistakes...
	}
	if v := testutil.ToFloat64(m.windowAccuracy.WithLabelValues("3")); v != 0 {
		t.Fatalf("accuracy %v after 1000 mistakes", v)
	}
	for i := 0; i < 750; i++ {
		g.accuracy(false) // ...then 750 correct: 750 of the last 1000
	}
	if v := testutil.ToFloat64(m.windowAccuracy.WithLabelValues("3")); v != 0.75 {
		t.Fatalf("accuracy %v, want 0.75", v)
	}
	var none *Metrics // a service without metrics still gets working gauges
	none.partition(0).accuracy(true)
	none.forget(0)
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
	m.watchDetectors([]pipeline.DetectorSpec{{Detector: "adwin", Signal: "mistakes"}, {Detector: "adwin", Signal: "queries"}})
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
	}
	got := map[string]int{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			if v := s.GetCounter().GetValue(); v != 0 {
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
