package keyed

import (
	"fmt"
	"reflect"
)

// Totals are a partition's cumulative counters: plain fields, cheap enough to
// read after every record.
type Totals struct {
	Events, Predictions, Queries, Labeled, Mistakes int64
	LabelsJoined, LabelsUnknown, LabelsExpired      int64
	// DelayedLabeled counts the labeled events (in Labeled) whose label came
	// after the event, on a label record joined to its pending query.
	DelayedLabeled int64
	// LabelsNoKey counts the label records (in LabelsUnknown) for a key the
	// partition has never seen — the mark of events and labels partitioned
	// differently.
	LabelsNoKey int64
	// InputsLost counts the labels joined to an awaited event (in
	// LabelsJoined) whose input was not re-read after a restore — the
	// events topic no longer held the event: the label scored the
	// prediction and taught nothing.
	InputsLost int64
	// Alerts counts drift alerts (incidents opened), AlertsBy per
	// Settings.Detectors index (the opening detector), and Resets the
	// learners restarted on a drift. KeysInWarning is a level: the keys
	// whose detectors last said warning (since the worker started).
	Alerts, Resets, KeysInWarning int64
	AlertsBy                      [MaxDetectors]int64
	// DetectionsAbsorbed counts detections that joined an open incident
	// (no alert), DetectionsBelowRise those whose signal rose less than
	// Settings.AlertMinRise (no incident), IncidentsResolved the incidents
	// closed.
	DetectionsAbsorbed, DetectionsBelowRise, IncidentsResolved int64
	// Asked counts the events whose label the learner uses when it comes:
	// every event for a learner that learns every label, the ones it asked
	// for (labeled or not) for a sampler. Asked/Events is the papers' query
	// rate; Queries counts the label requests emitted for unlabeled events.
	Asked int64
	// Dead letters by reason; DeadLetters is their sum.
	MissingKey, KeyTooLong, InvalidEvent, Rejected, DeadLetters int64
	// Skipped counts replayed records a key had already absorbed.
	Skipped int64
	// FollowedPopulation counts the predictions (in Predictions) that made
	// the population model's label rather than the key's own learner's
	// (Settings.Population); 0 without a population model.
	FollowedPopulation int64
	// PeerLearned counts the other partitions' labeled events the shared
	// part learned (Settings.SharedAcrossPartitions), PeerRejected their
	// records it could not read or learn from (their own partition
	// dead-letters them).
	PeerLearned, PeerRejected int64
	// PeerExpired counts the other partitions' unlabeled events the shared
	// part gave up waiting for (the pending bounds).
	PeerExpired int64
}

// Add adds o's counters to t (KeysInWarning, a level, adds up across
// partitions too).
func (t *Totals) Add(o Totals) { t.combine(&o, 1, true) }

// Since is t's counters minus base's: what was counted after base was
// read. KeysInWarning, a level, is t's.
func (t Totals) Since(base Totals) Totals {
	t.combine(&base, -1, false)
	return t
}

// combine adds sign × each of o's counters to t's, every int64 field and
// every entry of an int64 array (so that a counter added to Totals is
// summed and subtracted without another list of fields), KeysInWarning
// only when level is set. Add and Since run at scrape time and in reports,
// not per record: reflection's cost does not matter there.
func (t *Totals) combine(o *Totals, sign int64, level bool) {
	tv, ov := reflect.ValueOf(t).Elem(), reflect.ValueOf(o).Elem()
	for i := range tv.NumField() {
		f := tv.Field(i)
		switch {
		case tv.Type().Field(i).Name == "KeysInWarning" && !level:
		case f.Kind() == reflect.Int64:
			f.SetInt(f.Int() + sign*ov.Field(i).Int())
		case f.Kind() == reflect.Array:
			for j := range f.Len() {
				f.Index(j).SetInt(f.Index(j).Int() + sign*ov.Field(i).Index(j).Int())
			}
		default:
			panic(fmt.Sprintf("keyed.Totals.%s is a %s: a counter is an int64 or an array of them", tv.Type().Field(i).Name, f.Type()))
		}
	}
}

// Counter is one of Totals' counters as the service shows it: the metric
// driftstream_<Name>_total, with Help, and the field <Name> of a JSON
// summary. Value reads it from a Totals.
type Counter struct {
	Name  string
	Help  string
	Value func(*Totals) int64
}

// Counters is the table of Totals' plain counters the service exports,
// each once, in the order the metrics list them: the one list the
// metrics and summaries are made from. (Dead letters are exported by
// reason, alerts by detector and signal, the population's predictions by
// expert: labelled series the service builds itself.)
func Counters() []Counter {
	return []Counter{
		{"events", "Input events processed.", func(t *Totals) int64 { return t.Events }},
		{"predictions", "Predictions emitted.", func(t *Totals) int64 { return t.Predictions }},
		{"labeled", "Events whose label is known, inline or delayed (joined to its pending query): the ones scored.", func(t *Totals) int64 { return t.Labeled }},
		{"mistakes", "Labeled events predicted wrong (prequential; a delayed label scores the prediction made when its event came).", func(t *Totals) int64 { return t.Mistakes }},
		{"label_queries", "Label queries emitted.", func(t *Totals) int64 { return t.Queries }},
		{"labels_joined", "Delayed labels joined to a pending query: scored and learned.", func(t *Totals) int64 { return t.LabelsJoined }},
		{"labels_unknown", "Label records for unknown or already expired ids (dropped).", func(t *Totals) int64 { return t.LabelsUnknown }},
		{"labels_expired", "Unlabeled events whose awaited label was given up (TTL or the per-key bounds).", func(t *Totals) int64 { return t.LabelsExpired }},
		{"labels_without_key", "Label records for a key the partition has never seen (in labels_unknown_total): events and labels partitioned differently, or a label for an event that never came.", func(t *Totals) int64 { return t.LabelsNoKey }},
		{"label_inputs_lost", "Labels joined to an awaited event whose input the events topic no longer held when a restore re-read it (in labels_joined): scored, not learned. Keep the events topic's retention above the longest label delay.", func(t *Totals) int64 { return t.InputsLost }},
		{"learner_resets", "Keys' learners restarted on a confirmed drift (DRIFTSTREAM_ON_DRIFT=reset).", func(t *Totals) int64 { return t.Resets }},
		{"drift_detections_absorbed", "Drift detections on a key whose incident was open: joined to it, no alert.", func(t *Totals) int64 { return t.DetectionsAbsorbed }},
		{"drift_detections_below_rise", "Drift detections whose signal rose less than DRIFTSTREAM_ALERT_MIN_RISE from its reference window to its recent one (or on a key too young to measure it): no alert.", func(t *Totals) int64 { return t.DetectionsBelowRise }},
		{"shared_part_peer_labels", "Labeled events of the other partitions that the partition's shared part learned (DRIFTSTREAM_SHARED_ACROSS_PARTITIONS): every partition counts every other's, so this is (partitions − 1) × the labeled events when each partition reads the others.", func(t *Totals) int64 { return t.PeerLearned }},
		{"shared_part_peer_rejected", "Records of the other partitions that the shared part could not read or learn from (their own partition dead-letters them).", func(t *Totals) int64 { return t.PeerRejected }},
		{"shared_part_peer_expired", "Unlabeled events of the other partitions whose label the shared part gave up waiting for (DRIFTSTREAM_MAX_PENDING and DRIFTSTREAM_MAX_PENDING_BYTES across the other partitions, DRIFTSTREAM_PENDING_TTL records of their partition).", func(t *Totals) int64 { return t.PeerExpired }},
		{"drift_incidents_resolved", "Drift incidents closed: the signal back near its reference, or DRIFTSTREAM_ALERT_COOLDOWN events without a detection.", func(t *Totals) int64 { return t.IncidentsResolved }},
	}
}
