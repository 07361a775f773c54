package service

import (
	"runtime"
	"strconv"
	"time"

	"github.com/driftstream/driftstream/pipeline"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the service's Prometheus metrics (docs/spec/DESIGN.md §6). Labels are
// partitions, reasons, kinds and detectors only — never an entity key,
// whose cardinality is unbounded.
//
// The counts the partitions keep (events, labels, mistakes, dead letters,
// alerts…) and the partitions' gauges are read at scrape time from the
// service they are attached to (a prometheus.Collector, as client_golang's
// process collector does): they are kept once, in the partitions' Runners,
// and every series is there from the start. The rest are events only the
// service sees (checkpoint and restore durations, retries, failures), fed
// as they happen.
type Metrics struct {
	checkpointSeconds, restoreSeconds prometheus.Histogram
	checkpointBytes                   prometheus.Histogram
	partitionErrors, retries          *prometheus.CounterVec
	partitionFailed                   *prometheus.GaugeVec
	groupErrors                       prometheus.Counter
	stateDirBytes                     prometheus.Gauge
	scraped                           *scraped
}

// NewBuildInfo is driftstream_build_info: 1, labelled with the running
// build, so that a dashboard shows which version each pod runs.
func NewBuildInfo(version, commit string) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "driftstream", Name: "build_info",
		Help: "1, labelled with the running build's version, commit and Go version."}, []string{"version", "commit", "goversion"})
	g.WithLabelValues(version, commit, runtime.Version()).Set(1)
	return g
}

// NewMetrics registers the service's metrics on reg. Until a Service is
// created with them (Config.Metrics), the scraped counts read 0.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		checkpointSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "driftstream", Name: "checkpoint_duration_seconds",
			Help: "Time from taking a checkpoint to its commit: waiting behind earlier writes, flushing its outputs, writing it, committing (off the partition loop).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		checkpointBytes: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "driftstream", Name: "checkpoint_bytes",
			Help: "Bytes of key state written per checkpoint.", Buckets: prometheus.ExponentialBuckets(256, 4, 12)}),
		restoreSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "driftstream", Name: "restore_duration_seconds",
			Help: "Time to restore a partition's keys from the checkpoint store.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		partitionErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "driftstream", Name: "partition_errors_total",
			Help: "Partitions that stopped on an error, by the step that failed (restore, claim, source, process, sink, store, commit)."}, []string{"kind"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "driftstream", Name: "retries_total",
			Help: "Retriable errors retried in place, by step."}, []string{"step"}),
		partitionFailed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "driftstream", Name: "partition_failed",
			Help: "1 for a partition that failed and stays stopped until the process restarts."}, []string{"partition"}),
		groupErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "driftstream", Name: "group_errors_total",
			Help: "Consumer-group errors (kafka-go rejoins by itself)."}),
		stateDirBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "driftstream", Name: "state_dir_bytes",
			Help: "Bytes of files under DRIFTSTREAM_STATE_DIR (the partitions' key stores), read at most once a second after a checkpoint: what the volume's size limit must hold."}),
		scraped: newScraped(),
	}
	for _, col := range []prometheus.Collector{m.partitionErrors, m.retries, m.partitionFailed, m.groupErrors, m.stateDirBytes,
		m.checkpointSeconds, m.checkpointBytes, m.restoreSeconds, m.scraped} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	// Every labelled counter's series exists from the start, at 0: a
	// dashboard panel or an increase() alert then reads 0, not "No data",
	// on a healthy member.
	for _, step := range pipeline.Steps {
		m.partitionErrors.WithLabelValues(string(step))
		m.retries.WithLabelValues(string(step))
	}
	return m, nil
}

// attach makes the scraped metrics read s, with s's drift detectors'
// series (at 0 before any alert).
func (m *Metrics) attach(s *Service) {
	if m != nil {
		m.scraped.attach(s)
	}
}

func part(p int) string { return strconv.Itoa(p) }

// partitionObserver hears of a partition Runner's restores, checkpoints
// and retries (pipeline.Hook), for the metrics only the service sees.
type partitionObserver struct {
	s *Service
}

func (s *Service) observer() *partitionObserver { return &partitionObserver{s: s} }

// Restored counts how the partition got its state.
func (o *partitionObserver) Restored(res pipeline.Restored, _ pipeline.KeyCount, took time.Duration) {
	c := o.s.count
	switch res.Origin {
	case pipeline.FromParked:
		c.unparked.Add(1)
	case pipeline.FromMemory:
		c.resumed.Add(1)
	case pipeline.FromInputs:
		c.rebuilt.Add(1)
	default:
		if m := o.s.cfg.Metrics; m != nil {
			m.restoreSeconds.Observe(took.Seconds())
		}
	}
	if res.CaughtUp > 0 {
		c.caughtUp.Add(1)
	}
	c.torn.Add(int64(res.TornRecords()))
	if res.Verified {
		c.verified.Add(1)
	}
	if res.Mismatch {
		c.mismatched.Add(1)
	}
}

// Checkpointed measures the checkpoint and the state directory.
func (o *partitionObserver) Checkpointed(_, bytes int, _ pipeline.KeyCount, took time.Duration) {
	o.s.measureStateDir()
	if m := o.s.cfg.Metrics; m != nil {
		m.checkpointSeconds.Observe(took.Seconds())
		m.checkpointBytes.Observe(float64(bytes))
	}
}

// Retrying counts a retry.
func (o *partitionObserver) Retrying(step pipeline.Step, _ error, _ int, _ time.Duration) {
	if m := o.s.cfg.Metrics; m != nil {
		m.retries.WithLabelValues(string(step)).Inc()
	}
}
