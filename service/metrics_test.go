package service

import (
	"testing"

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
