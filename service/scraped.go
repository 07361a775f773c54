package service

import (
	"sync"
	"sync/atomic"

	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/pipeline"

	"github.com/prometheus/client_golang/prometheus"
)

// scraped is the prometheus.Collector of the counts and gauges the
// partitions keep: each scrape reads them from the attached service's
// counters, so they are kept once and every series exists from the start.
type scraped struct {
	svc atomic.Pointer[Service]
	// detectors are the drift-alert series shown before a service is
	// attached (watchDetectors); an attached service's own replace them.
	mu        sync.Mutex
	detectors []keyed.DetectorSpec

	// totals are keyed.Counters' metrics, in its order.
	totals                                                            []*prometheus.Desc
	counters                                                          []keyed.Counter
	resumed, unparked, caughtUp, parkedRefused, tornRecords, rebuilt  *prometheus.Desc
	restoreVerified, restoreMismatch                                  *prometheus.Desc
	deadLetters, outputsRefused, driftAlerts, followed                *prometheus.Desc
	windowAccuracy, lag, labelsLag, keys, keysResident, keysInWarning *prometheus.Desc
	populationShare, populationWeight                                 *prometheus.Desc
	unreadPartitions, ready, mergeWentOn                              *prometheus.Desc
}

func newScraped() *scraped {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("driftstream_"+name, help, labels, nil)
	}
	c := &scraped{
		counters:         keyed.Counters(),
		resumed:          d("partitions_resumed_total", "Partitions taken back after a rebalance from the state this process kept in memory, without reading the changelog (restore_duration_seconds counts full restores)."),
		unparked:         d("partitions_unparked_total", "Partitions resumed at start from the key store a former process parked on this member's state volume (DRIFTSTREAM_PARK_STATE), without reading the changelog."),
		caughtUp:         d("partitions_caught_up_total", "Partitions resumed (from memory or a parked key store) whose changelog another member had written to meanwhile, brought up to date by reading only the records written since (the rest of the changelog is not read)."),
		tornRecords:      d("checkpoint_torn_records_total", "Key records of torn checkpoints (their writer stopped between them and the checkpoint's marker, e.g. killed while writing it) set aside by restores and catch-ups: their keys kept their records of the checkpoint before, and were written again at the next checkpoint."),
		restoreVerified:  d("restore_verified_total", "Restores and catch-ups whose state proved itself: the digest of the key records loaded is the one their last checkpoint's marker carries. A restore that met a record it could not use is not verified (it replays that key from further back, or rebuilds the partition)."),
		restoreMismatch:  d("restore_mismatch_total", "Restores whose state's digest was not their last checkpoint's (a record missing, one too many, or another one than its writer's): never used; the partition was rebuilt from its inputs (partitions_rebuilt_total), or failed when retention had deleted input records."),
		rebuilt:          d("partitions_rebuilt_total", "Partitions rebuilt from their input topics' first records because the changelog could not restore them exactly: with a population model, a key record that could not be used (unreadable, or written by a former owner after a newer one claimed the partition and left alone by compaction). A rebuild fails the partition if retention deleted any input record."),
		parkedRefused:    d("parked_stores_refused_total", "Parked key stores (DRIFTSTREAM_PARK_STATE) found at start that could not be resumed (damaged: Pebble did not reopen the tables the park left; or parked for another partition, changelog, release or configuration), removed, their partitions restored from the changelog."),
		deadLetters:      d("dead_letters_total", "Records sent to the dead-letter topic, by reason.", "reason"),
		outputsRefused:   d("outputs_refused_total", "Outputs the broker refused for themselves (too large, invalid), each replaced by a dead letter (DRIFTSTREAM_ON_OUTPUT_ERROR=dead-letter), by output kind and reason; counted again when a retried flush writes it again.", "kind", "reason"),
		driftAlerts:      d("drift_alerts_total", "Drift alerts sent to the alerts topic, by detector and signal.", "detector", "signal"),
		followed:         d("population_predictions_total", "Predictions made with the mixture population model (DRIFTSTREAM_POPULATION=mixture), by the expert whose label the key's mixture made: the population model's or the key's own learner's.", "follows"),
		windowAccuracy:   d("window_accuracy", "Accuracy over the partition's last 1000 labeled events.", "partition"),
		labelsLag:        d("labels_lag", "Labels-topic records behind the last one processed, with DRIFTSTREAM_LABELS_TOPIC: a labels topic that falls behind or stops shows here (the events wait for its records that are on the broker).", "partition"),
		lag:              d("consumer_lag", "Events-topic records behind the last one processed (high watermark - next offset).", "partition"),
		keys:             d("keys", "Keys held by the partition's worker.", "partition"),
		keysResident:     d("keys_in_memory", "Keys of the partition held in memory after its last checkpoint or restore: driftstream_keys without a key store (DRIFTSTREAM_STATE_DIR), at most DRIFTSTREAM_CACHE_KEYS with one.", "partition"),
		keysInWarning:    d("keys_in_warning", "Keys whose drift detectors last said warning, since the partition was assigned.", "partition"),
		populationShare:  d("population_share", "Share of the partition's last 1000 predictions that made the population model's label (DRIFTSTREAM_POPULATION=mixture) rather than the key's own learner's; absent before the first.", "partition"),
		mergeWentOn:      d("merge_went_on_total", "Times a partition's merge of the events and labels topics went on without a caught-up one after waiting DRIFTSTREAM_MERGE_WAIT for records still to reach the broker (pipeline.Merge; never with the default wait 0).", "partition"),
		ready:            d("ready", "1 when the member is ready (/readyz: in a consumer-group generation, every partition it owns restored and running, no input partition unread), else 0: an alert can tell a member that runs from one that is stuck joining or restoring."),
		unreadPartitions: d("unread_input_partitions", "Partitions added to an input topic while the service runs, which it does not read (it is unready meanwhile): see docs/OPERATIONS.md, \"When an input topic grows\"."),
		populationWeight: d("population_weight", "Mean weight the mixtures of the keys behind the partition's last 1000 predictions gave the population model (DRIFTSTREAM_POPULATION=mixture); the keys' own learners had the rest. Absent before the first prediction.", "partition"),
	}
	for _, k := range c.counters {
		c.totals = append(c.totals, d(k.Name+"_total", k.Help))
	}
	return c
}

func (c *scraped) attach(s *Service) { c.svc.Store(s) }

// labelsTopic reports whether the attached service reads a labels topic.
func (c *scraped) labelsTopic() bool {
	s := c.svc.Load()
	return s != nil && s.cfg.Topics.Labels != ""
}

// watchDetectors shows the drift-alert series of specs, at 0, until a
// service is attached.
func (m *Metrics) watchDetectors(specs []keyed.DetectorSpec) {
	if m == nil {
		return
	}
	m.scraped.mu.Lock()
	m.scraped.detectors = specs
	m.scraped.mu.Unlock()
}

// Describe sends every metric's description.
func (c *scraped) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.totals {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{c.ready, c.mergeWentOn, c.resumed, c.unparked, c.caughtUp, c.tornRecords, c.rebuilt, c.restoreVerified, c.restoreMismatch, c.parkedRefused, c.deadLetters, c.outputsRefused,
		c.driftAlerts, c.followed, c.windowAccuracy, c.lag, c.labelsLag, c.keys, c.keysResident, c.keysInWarning, c.populationShare, c.populationWeight, c.unreadPartitions} {
		ch <- d
	}
}

// Collect reads the attached service's counters.
func (c *scraped) Collect(ch chan<- prometheus.Metric) {
	var (
		sum       pipeline.Totals
		parts     []partitionSnapshot
		cnt       = newCounters()
		detectors []keyed.DetectorSpec
		mixes     bool
	)
	if s := c.svc.Load(); s != nil {
		cnt, detectors, mixes = s.count, s.cfg.Pipeline.Detectors, s.cfg.Pipeline.Mixes()
		sum, parts = cnt.read()
	} else {
		c.mu.Lock()
		detectors = c.detectors
		c.mu.Unlock()
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, p int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, part(p))
	}
	for i, k := range c.counters {
		counter(c.totals[i], k.Value(&sum))
	}
	counter(c.resumed, cnt.resumed.Load())
	counter(c.unparked, cnt.unparked.Load())
	counter(c.caughtUp, cnt.caughtUp.Load())
	counter(c.tornRecords, cnt.torn.Load())
	counter(c.rebuilt, cnt.rebuilt.Load())
	counter(c.restoreVerified, cnt.verified.Load())
	counter(c.restoreMismatch, cnt.mismatched.Load())
	counter(c.parkedRefused, cnt.parkedRefused.Load())
	unread, ready := int64(0), 0.0
	if s := c.svc.Load(); s != nil {
		unread = s.unreadPartitions.Load()
		if ok, _ := s.Ready(); ok {
			ready = 1
		}
	}
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, ready)
	for p, n := range cnt.mergesWentOn() {
		ch <- prometheus.MustNewConstMetric(c.mergeWentOn, prometheus.CounterValue, float64(n), part(p))
	}
	ch <- prometheus.MustNewConstMetric(c.unreadPartitions, prometheus.GaugeValue, float64(unread))

	refused, byReason := cnt.refusals(), map[string]int64{}
	for r, n := range refused {
		counter(c.outputsRefused, n, r.kind, r.reason)
		byReason[r.reason] += n
	}
	byReason[pipeline.ReasonMissingKey] += sum.MissingKey
	byReason[pipeline.ReasonKeyTooLong] += sum.KeyTooLong
	byReason[pipeline.ReasonInvalidEvent] += sum.InvalidEvent
	byReason[pipeline.ReasonRejected] += sum.Rejected
	for reason, n := range byReason {
		counter(c.deadLetters, n, reason)
	}
	// Two detectors of one kind on one signal (other parameters) share a series.
	type series struct{ detector, signal string }
	alerts := map[series]int64{}
	for i, spec := range detectors {
		alerts[series{spec.Detector, spec.Signal}] += sum.AlertsBy[i]
	}
	for k, n := range alerts {
		counter(c.driftAlerts, n, k.detector, k.signal)
	}
	if mixes {
		counter(c.followed, sum.FollowedPopulation, "population")
		counter(c.followed, sum.Predictions-sum.FollowedPopulation, "own")
	}
	for _, ps := range parts {
		s := ps.snap
		gauge(c.lag, float64(s.Lag), ps.p)
		if c.labelsTopic() {
			gauge(c.labelsLag, float64(s.LabelsLag), ps.p)
		}
		gauge(c.keys, float64(s.Keys.Keys), ps.p)
		gauge(c.keysResident, float64(s.Keys.Resident), ps.p)
		gauge(c.keysInWarning, float64(s.Totals.KeysInWarning), ps.p)
		// Absent, not 0, before the first labeled event: an accuracy
		// alert does not fire on an idle partition.
		if s.WindowLabeled > 0 {
			gauge(c.windowAccuracy, s.WindowAccuracy, ps.p)
		}
		if mixes && s.PopulationPredictions > 0 {
			gauge(c.populationShare, s.PopulationShare, ps.p)
			gauge(c.populationWeight, s.PopulationWeight, ps.p)
		}
	}
}
