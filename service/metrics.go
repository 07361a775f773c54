package service

import (
	"runtime"
	"strconv"
	"time"

	"github.com/driftstream/driftstream/internal/window"
	"github.com/driftstream/driftstream/pipeline"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the service's Prometheus metrics (DESIGN §6). Labels are
// partitions and reasons only — never an entity key, whose cardinality is
// unbounded.
type Metrics struct {
	events, predictions, labeled, mistakes     prometheus.Counter
	queries                                    prometheus.Counter
	labelsJoined, labelsUnknown, labelsExpired prometheus.Counter
	deadLetters, outputsRefused                *prometheus.CounterVec
	windowAccuracy, lag, keys, keysResident    *prometheus.GaugeVec
	checkpointSeconds, restoreSeconds          prometheus.Histogram
	checkpointBytes                            prometheus.Histogram
	partitionErrors, retries, driftAlerts      *prometheus.CounterVec
	resets, labelsNoKey, resumed, unparked     prometheus.Counter
	caughtUp, parkedRefused                    prometheus.Counter
	keysInWarning                              *prometheus.GaugeVec
	partitionFailed                            *prometheus.GaugeVec
	groupErrors                                prometheus.Counter
	stateDirBytes                              prometheus.Gauge
}

// NewBuildInfo is driftstream_build_info: 1, labelled with the running
// build, so that a dashboard shows which version each pod runs.
func NewBuildInfo(version, commit string) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "driftstream", Name: "build_info",
		Help: "1, labelled with the running build's version, commit and Go version."}, []string{"version", "commit", "goversion"})
	g.WithLabelValues(version, commit, runtime.Version()).Set(1)
	return g
}

// NewMetrics registers the service's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "driftstream", Name: name, Help: help})
	}
	m := &Metrics{
		events:        c("events_total", "Input events processed."),
		predictions:   c("predictions_total", "Predictions emitted."),
		labeled:       c("labeled_total", "Events whose label is known, inline or delayed (joined to its pending query): the ones scored."),
		mistakes:      c("mistakes_total", "Labeled events predicted wrong (prequential; a delayed label scores the prediction made when its event came)."),
		queries:       c("label_queries_total", "Label queries emitted."),
		labelsJoined:  c("labels_joined_total", "Delayed labels joined to a pending query: scored and learned."),
		labelsUnknown: c("labels_unknown_total", "Label records for unknown or already expired ids (dropped)."),
		labelsExpired: c("labels_expired_total", "Unlabeled events whose awaited label was given up (TTL or the per-key bounds)."),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "driftstream", Name: "dead_letters_total",
			Help: "Records sent to the dead-letter topic, by reason."}, []string{"reason"}),
		outputsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "driftstream", Name: "outputs_refused_total",
			Help: "Outputs the broker refused for themselves (too large, invalid), each replaced by a dead letter (DRIFTSTREAM_ON_OUTPUT_ERROR=dead-letter), by output kind and reason; counted again when a retried flush writes it again."}, []string{"kind", "reason"}),
		windowAccuracy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "driftstream", Name: "window_accuracy",
			Help: "Accuracy over the partition's last 1000 labeled events."}, []string{"partition"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "driftstream", Name: "consumer_lag",
			Help: "Events-topic records behind the last one processed (high watermark - next offset)."}, []string{"partition"}),
		keys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "driftstream", Name: "keys",
			Help: "Keys held by the partition's worker."}, []string{"partition"}),
		stateDirBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "driftstream", Name: "state_dir_bytes",
			Help: "Bytes of files under DRIFTSTREAM_STATE_DIR (the partitions' key stores), read at most once a second after a checkpoint: what the volume's size limit must hold."}),
		keysResident: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "driftstream", Name: "keys_in_memory",
			Help: "Keys of the partition held in memory after its last checkpoint or restore: driftstream_keys without a key store (DRIFTSTREAM_STATE_DIR), at most DRIFTSTREAM_CACHE_KEYS with one."}, []string{"partition"}),
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
		groupErrors: c("group_errors_total", "Consumer-group errors (kafka-go rejoins by itself)."),
		driftAlerts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "driftstream", Name: "drift_alerts_total",
			Help: "Drift alerts sent to the alerts topic, by detector and signal."}, []string{"detector", "signal"}),
		resumed:       c("partitions_resumed_total", "Partitions taken back after a rebalance from the state this process kept in memory, without reading the changelog (restore_duration_seconds counts full restores)."),
		unparked:      c("partitions_unparked_total", "Partitions resumed at start from the key store a former process parked on this member's state volume (DRIFTSTREAM_PARK_STATE), without reading the changelog."),
		caughtUp:      c("partitions_caught_up_total", "Partitions resumed (from memory or a parked key store) whose changelog another member had written to meanwhile, brought up to date by reading only the records written since (the rest of the changelog is not read)."),
		parkedRefused: c("parked_stores_refused_total", "Parked key stores (DRIFTSTREAM_PARK_STATE) found at start that could not be resumed (damaged: Pebble did not reopen the tables the park left; or parked for another partition, changelog, release or configuration), removed, their partitions restored from the changelog."),
		resets:        c("learner_resets_total", "Keys' learners restarted on a confirmed drift (DRIFTSTREAM_ON_DRIFT=reset)."),
		labelsNoKey:   c("labels_without_key_total", "Label records for a key the partition has never seen (in labels_unknown_total): events and labels partitioned differently, or a label for an event that never came."),
		keysInWarning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "driftstream", Name: "keys_in_warning",
			Help: "Keys whose drift detectors last said warning, since the partition was assigned."}, []string{"partition"}),
	}
	for _, col := range []prometheus.Collector{m.resumed, m.unparked, m.caughtUp, m.parkedRefused, m.labelsNoKey, m.driftAlerts, m.resets, m.keysInWarning, m.labeled, m.partitionErrors, m.retries, m.partitionFailed, m.groupErrors, m.events, m.predictions, m.mistakes, m.queries, m.labelsJoined, m.labelsUnknown, m.labelsExpired,
		m.deadLetters, m.outputsRefused, m.windowAccuracy, m.lag, m.keys, m.keysResident, m.stateDirBytes, m.checkpointSeconds, m.checkpointBytes, m.restoreSeconds} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	// Every labelled counter's series exists from the start, at 0: a
	// dashboard panel or an increase() alert then reads 0, not "No data",
	// on a healthy member. (Drift alerts' series depend on the configured
	// detectors: see watchDetectors.)
	for _, reason := range pipeline.Reasons {
		m.deadLetters.WithLabelValues(reason)
	}
	for _, kind := range pipeline.OutputKinds {
		for _, reason := range []string{pipeline.ReasonOutputTooLarge, pipeline.ReasonOutputInvalid} {
			m.outputsRefused.WithLabelValues(kind, reason)
		}
	}
	for _, step := range pipeline.Steps {
		m.partitionErrors.WithLabelValues(string(step))
		m.retries.WithLabelValues(string(step))
	}
	return m, nil
}

// watchDetectors creates the drift-alert series of each configured
// detector and signal, at 0.
func (m *Metrics) watchDetectors(specs []pipeline.DetectorSpec) {
	if m == nil {
		return
	}
	for _, spec := range specs {
		m.driftAlerts.WithLabelValues(spec.Detector, spec.Signal)
	}
}

func part(p int) string { return strconv.Itoa(p) }

// partitionGauges are one partition's gauges, resolved once rather than per
// record, with the window of its last 1000 labeled outcomes. A nil Metrics
// gives gauges that discard everything.
type partitionGauges struct {
	lag, keys, keysResident, keysInWarning prometheus.Gauge
	// windowAccuracy is created at the partition's first labeled event: until
	// then the series is absent (no sample), not 0, so that an accuracy alert
	// does not fire on an idle partition.
	windowAccuracy    prometheus.Gauge
	newWindowAccuracy func() prometheus.Gauge
	window            *window.Accuracy
}

func (m *Metrics) partition(p int) *partitionGauges {
	g := &partitionGauges{window: window.New(1000)}
	if m == nil {
		d := prometheus.NewGauge(prometheus.GaugeOpts{Name: "discarded"})
		g.lag, g.keys, g.keysResident, g.keysInWarning, g.newWindowAccuracy = d, d, d, d, func() prometheus.Gauge { return d }
		return g
	}
	g.lag, g.keys, g.keysResident, g.keysInWarning = m.lag.WithLabelValues(part(p)), m.keys.WithLabelValues(part(p)), m.keysResident.WithLabelValues(part(p)), m.keysInWarning.WithLabelValues(part(p))
	g.newWindowAccuracy = func() prometheus.Gauge { return m.windowAccuracy.WithLabelValues(part(p)) }
	return g
}

// accuracy records one labeled outcome and updates the windowed accuracy.
func (g *partitionGauges) accuracy(wrong bool) {
	if g.windowAccuracy == nil {
		g.windowAccuracy = g.newWindowAccuracy()
	}
	g.window.Add(wrong)
	g.windowAccuracy.Set(g.window.Value())
}

// forget drops a revoked partition's series.
func (m *Metrics) forget(p int) {
	if m == nil {
		return
	}
	m.windowAccuracy.DeleteLabelValues(part(p))
	m.keysInWarning.DeleteLabelValues(part(p))
	m.lag.DeleteLabelValues(part(p))
	m.keys.DeleteLabelValues(part(p))
	m.keysResident.DeleteLabelValues(part(p))
}

// partitionObserver turns a partition Runner's events into the service's
// counters, gauges and partition state.
type partitionObserver struct {
	s      *Service
	p      int
	st     *partState
	gauges *partitionGauges
}

func (s *Service) observer(p int, st *partState) *partitionObserver {
	return &partitionObserver{s: s, p: p, st: st, gauges: s.cfg.Metrics.partition(p)}
}

// setKeys sets the partition's key gauges.
func (g *partitionGauges) setKeys(k pipeline.KeyCount) {
	g.keys.Set(float64(k.Keys))
	g.keysResident.Set(float64(k.Resident))
}

func (o *partitionObserver) Restored(res pipeline.Restored, keys pipeline.KeyCount, took time.Duration) {
	o.gauges.setKeys(keys)
	switch {
	case res.Unparked:
		o.s.unparked.Add(1)
	case res.Resumed:
		o.s.resumed.Add(1)
	}
	o.st.resumed.Store(res.Resumed && !res.Unparked)
	o.st.unparked.Store(res.Unparked)
	o.st.caughtUp.Store(res.CaughtUp)
	if res.CaughtUp > 0 {
		o.s.caughtUp.Add(1)
	}
	if m := o.s.cfg.Metrics; m != nil {
		if res.CaughtUp > 0 {
			m.caughtUp.Inc()
		}
		switch {
		case res.Unparked:
			m.unparked.Inc()
		case res.Resumed:
			m.resumed.Inc()
		default:
			m.restoreSeconds.Observe(took.Seconds())
		}
	}
	o.st.restored.Store(true)
}

func (o *partitionObserver) Processed(f *pipeline.Fetched, before, after *pipeline.Totals) {
	if f.Topic == pipeline.EventsTopic {
		lag := max(0, f.HighWatermark-f.Offset-1)
		o.st.lag.Store(lag)
		o.gauges.lag.Set(float64(lag))
	}
	if after.Labeled > before.Labeled { // at most one scored event per record
		o.gauges.accuracy(after.Mistakes > before.Mistakes)
	}
	if after.KeysInWarning != before.KeysInWarning {
		o.gauges.keysInWarning.Set(float64(after.KeysInWarning))
	}
	// Counters last: a scrape that sees a labeled event counted also sees
	// the window accuracy it moved.
	o.s.count(before, after)
}

func (o *partitionObserver) Checkpointed(_, bytes int, keys pipeline.KeyCount, took time.Duration) {
	o.gauges.setKeys(keys)
	o.s.measureStateDir()
	if m := o.s.cfg.Metrics; m != nil {
		m.checkpointSeconds.Observe(took.Seconds())
		m.checkpointBytes.Observe(float64(bytes))
	}
}

func (o *partitionObserver) Retrying(step pipeline.Step, _ error, _ int, _ time.Duration) {
	if m := o.s.cfg.Metrics; m != nil {
		m.retries.WithLabelValues(string(step)).Inc()
	}
}

// forget drops the partition's series when it is revoked.
func (o *partitionObserver) forget() { o.s.cfg.Metrics.forget(o.p) }

// add adds d to c unless it is 0: most records move few of the counters,
// and an Add is an atomic operation on a shared cache line.
func add(c prometheus.Counter, d int64) {
	if d != 0 {
		c.Add(float64(d))
	}
}

func (s *Service) count(before, after *pipeline.Totals) {
	if m := s.cfg.Metrics; m != nil {
		add(m.events, after.Events-before.Events)
		add(m.predictions, after.Predictions-before.Predictions)
		add(m.labeled, after.Labeled-before.Labeled)
		add(m.mistakes, after.Mistakes-before.Mistakes)
		add(m.queries, after.Queries-before.Queries)
		add(m.labelsJoined, after.LabelsJoined-before.LabelsJoined)
		add(m.labelsUnknown, after.LabelsUnknown-before.LabelsUnknown)
		add(m.labelsNoKey, after.LabelsNoKey-before.LabelsNoKey)
		add(m.labelsExpired, after.LabelsExpired-before.LabelsExpired)
		if after.Alerts > before.Alerts {
			for i, spec := range s.cfg.Pipeline.Detectors {
				if d := after.AlertsBy[i] - before.AlertsBy[i]; d > 0 {
					m.driftAlerts.WithLabelValues(spec.Detector, spec.Signal).Add(float64(d))
				}
			}
			m.resets.Add(float64(after.Resets - before.Resets))
		}
		if after.DeadLetters > before.DeadLetters {
			m.deadLetters.WithLabelValues(pipeline.ReasonMissingKey).Add(float64(after.MissingKey - before.MissingKey))
			m.deadLetters.WithLabelValues(pipeline.ReasonKeyTooLong).Add(float64(after.KeyTooLong - before.KeyTooLong))
			m.deadLetters.WithLabelValues(pipeline.ReasonInvalidEvent).Add(float64(after.InvalidEvent - before.InvalidEvent))
			m.deadLetters.WithLabelValues(pipeline.ReasonRejected).Add(float64(after.Rejected - before.Rejected))
		}
	}
	s.events.Add(after.Events - before.Events)
	s.predictions.Add(after.Predictions - before.Predictions)
	s.queries.Add(after.Queries - before.Queries)
	s.labeled.Add(after.Labeled - before.Labeled)
	s.mistakes.Add(after.Mistakes - before.Mistakes)
	s.joined.Add(after.LabelsJoined - before.LabelsJoined)
	s.dead.Add(after.DeadLetters - before.DeadLetters)
}

// refusedOutput counts an output the broker refused, replaced by a dead
// letter.
func (s *Service) refusedOutput(kind, reason string) {
	s.dead.Add(1)
	if m := s.cfg.Metrics; m != nil {
		m.deadLetters.WithLabelValues(reason).Inc()
		m.outputsRefused.WithLabelValues(kind, reason).Inc()
	}
}
