package service

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the service's Prometheus metrics (DESIGN §6). Labels are
// partitions and reasons only — never an entity key, whose cardinality is
// unbounded.
type Metrics struct {
	events, predictions, mistakes, queries     prometheus.Counter
	labelsJoined, labelsUnknown, labelsExpired prometheus.Counter
	deadLetters                                *prometheus.CounterVec
	windowAccuracy, lag, keys                  *prometheus.GaugeVec
	checkpointSeconds, restoreSeconds          prometheus.Histogram
	checkpointBytes                            prometheus.Histogram
}

// NewMetrics registers the service's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "driftstream", Name: name, Help: help})
	}
	m := &Metrics{
		events:        c("events_total", "Input events processed."),
		predictions:   c("predictions_total", "Predictions emitted."),
		mistakes:      c("mistakes_total", "Labeled events predicted wrong (prequential)."),
		queries:       c("label_queries_total", "Label queries emitted."),
		labelsJoined:  c("labels_joined_total", "Delayed labels joined to a pending query and learned."),
		labelsUnknown: c("labels_unknown_total", "Label records for unknown or already expired ids (dropped)."),
		labelsExpired: c("labels_expired_total", "Pending label queries dropped by TTL or the per-key bound."),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "driftstream", Name: "dead_letters_total",
			Help: "Records sent to the dead-letter topic, by reason."}, []string{"reason"}),
		windowAccuracy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "driftstream", Name: "window_accuracy",
			Help: "Accuracy over the partition's last 1000 labeled events."}, []string{"partition"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "driftstream", Name: "consumer_lag",
			Help: "Events-topic records behind the last one processed (high watermark - next offset)."}, []string{"partition"}),
		keys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "driftstream", Name: "keys",
			Help: "Keys held by the partition's worker."}, []string{"partition"}),
		checkpointSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "driftstream", Name: "checkpoint_duration_seconds",
			Help: "Time to flush outputs, write a checkpoint and commit.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		checkpointBytes: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "driftstream", Name: "checkpoint_bytes",
			Help: "Bytes of key state written per checkpoint.", Buckets: prometheus.ExponentialBuckets(256, 4, 12)}),
		restoreSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "driftstream", Name: "restore_duration_seconds",
			Help: "Time to restore a partition's keys from the checkpoint store.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
	}
	for _, col := range []prometheus.Collector{m.events, m.predictions, m.mistakes, m.queries, m.labelsJoined, m.labelsUnknown, m.labelsExpired,
		m.deadLetters, m.windowAccuracy, m.lag, m.keys, m.checkpointSeconds, m.checkpointBytes, m.restoreSeconds} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func part(p int) string { return strconv.Itoa(p) }

// partitionGauges are one partition's gauges, resolved once rather than per
// record, with the window of its last 1000 labeled outcomes. A nil Metrics
// gives gauges that discard everything.
type partitionGauges struct {
	lag, keys, windowAccuracy prometheus.Gauge
	wrong                     []bool
	next, filled, mistakes    int
}

func (m *Metrics) partition(p int) *partitionGauges {
	g := &partitionGauges{wrong: make([]bool, 1000)}
	if m == nil {
		d := prometheus.NewGauge(prometheus.GaugeOpts{Name: "discarded"})
		g.lag, g.keys, g.windowAccuracy = d, d, d
		return g
	}
	g.lag, g.keys, g.windowAccuracy = m.lag.WithLabelValues(part(p)), m.keys.WithLabelValues(part(p)), m.windowAccuracy.WithLabelValues(part(p))
	return g
}

// accuracy records one labeled outcome and updates the windowed accuracy.
func (g *partitionGauges) accuracy(wrong bool) {
	if g.filled == len(g.wrong) {
		if g.wrong[g.next] {
			g.mistakes--
		}
	} else {
		g.filled++
	}
	g.wrong[g.next] = wrong
	if wrong {
		g.mistakes++
	}
	g.next = (g.next + 1) % len(g.wrong)
	g.windowAccuracy.Set(1 - float64(g.mistakes)/float64(g.filled))
}

// forget drops a revoked partition's series.
func (m *Metrics) forget(p int) {
	if m == nil {
		return
	}
	m.windowAccuracy.DeleteLabelValues(part(p))
	m.lag.DeleteLabelValues(part(p))
	m.keys.DeleteLabelValues(part(p))
}
