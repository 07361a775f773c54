package keyed

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
	// Alerts counts drift alerts, AlertsBy per Settings.Detectors index, and
	// Resets the learners restarted on a drift. KeysInWarning is a level:
	// the keys whose detectors last said warning (since the worker started).
	Alerts, Resets, KeysInWarning int64
	AlertsBy                      [MaxDetectors]int64
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
}

// Add adds o's counters to t (KeysInWarning, a level, adds up across
// partitions too).
func (t *Totals) Add(o Totals) {
	t.Events += o.Events
	t.Predictions += o.Predictions
	t.Queries += o.Queries
	t.Labeled += o.Labeled
	t.Mistakes += o.Mistakes
	t.LabelsJoined += o.LabelsJoined
	t.LabelsUnknown += o.LabelsUnknown
	t.LabelsExpired += o.LabelsExpired
	t.DelayedLabeled += o.DelayedLabeled
	t.LabelsNoKey += o.LabelsNoKey
	t.Alerts += o.Alerts
	t.Resets += o.Resets
	t.KeysInWarning += o.KeysInWarning
	for i := range t.AlertsBy {
		t.AlertsBy[i] += o.AlertsBy[i]
	}
	t.Asked += o.Asked
	t.MissingKey += o.MissingKey
	t.KeyTooLong += o.KeyTooLong
	t.InvalidEvent += o.InvalidEvent
	t.Rejected += o.Rejected
	t.DeadLetters += o.DeadLetters
	t.Skipped += o.Skipped
	t.FollowedPopulation += o.FollowedPopulation
}

// Since is t's counters minus base's: what was counted after base was
// read. KeysInWarning, a level, is t's.
func (t Totals) Since(base Totals) Totals {
	d := t
	d.Events -= base.Events
	d.Predictions -= base.Predictions
	d.Queries -= base.Queries
	d.Labeled -= base.Labeled
	d.Mistakes -= base.Mistakes
	d.LabelsJoined -= base.LabelsJoined
	d.LabelsUnknown -= base.LabelsUnknown
	d.LabelsExpired -= base.LabelsExpired
	d.DelayedLabeled -= base.DelayedLabeled
	d.LabelsNoKey -= base.LabelsNoKey
	d.Alerts -= base.Alerts
	d.Resets -= base.Resets
	for i := range d.AlertsBy {
		d.AlertsBy[i] -= base.AlertsBy[i]
	}
	d.Asked -= base.Asked
	d.MissingKey -= base.MissingKey
	d.KeyTooLong -= base.KeyTooLong
	d.InvalidEvent -= base.InvalidEvent
	d.Rejected -= base.Rejected
	d.DeadLetters -= base.DeadLetters
	d.Skipped -= base.Skipped
	d.FollowedPopulation -= base.FollowedPopulation
	return d
}
