package pipeline

import (
	"sync"

	"github.com/driftstream/driftstream/internal/window"
)

// Totals returns the worker's cumulative counters.
func (w *Worker) Totals() Totals { return w.stats }

// Effect is what one record did to its partition's counters: the
// difference it made to Events, Labeled, Mistakes, Queries and Alerts
// (each 0 or 1 but Alerts), and the outcome it scored when Labeled is 1.
// A Runner hands it to its RecordHooks, so that they need not compare
// copies of the counters.
type Effect struct {
	Events, Labeled, Mistakes, Queries, Alerts int64
	// Outcome is the scored prediction, when Labeled is 1.
	Outcome Outcome
}

// WindowSize is the number of a partition's last labeled events that
// Snapshot.WindowAccuracy covers, and of its last predictions that
// Snapshot.PopulationShare and PopulationWeight cover.
const WindowSize = 1000

// Snapshot is a partition's counters and gauges at one point in time, as
// its Runner publishes them after every record: what metrics read at
// scrape time, and the service and backtests sum.
type Snapshot struct {
	// Totals are the counters of the records this Runner processed (a
	// resumed worker's earlier counts are not in them; KeysInWarning, a
	// level, is the worker's).
	Totals Totals
	// Phase is where the Runner is in its life; Restore is how it got its
	// state, from PhaseRunning on (zero before, and in a Runner that stopped
	// or failed before its restore finished).
	Phase   Phase
	Restore Restored
	// Keys counts the partition's keys at its last restore or checkpoint.
	Keys KeyCount
	// Lag is how many events-topic records were behind the last one
	// processed (high watermark − next offset); 0 before the first.
	Lag int64
	// LabelsLag is the same for the labels topic, when there is one: a
	// labels topic that falls behind or stops shows here.
	LabelsLag int64
	// WindowLabeled is how many labeled events WindowAccuracy covers (at
	// most WindowSize, 0 before the first), WindowAccuracy the share of
	// them predicted right.
	WindowLabeled  int
	WindowAccuracy float64
	// With a population model: PopulationPredictions is how many of the
	// partition's last predictions (at most WindowSize) the next two cover;
	// PopulationShare is the share of them that made the population
	// model's label, PopulationWeight the mean weight the predicting keys'
	// mixtures gave the population model (the own learner had the rest).
	PopulationPredictions             int
	PopulationShare, PopulationWeight float64
}

// published is a Runner's Snapshot: written by the partition's goroutine
// after every record, read by any goroutine.
type published struct {
	mu sync.Mutex
	// snap holds the worker's own counters in Totals; get subtracts base,
	// the worker's counters when this Runner took it (so the per-record
	// work is a copy, and the subtraction happens when someone reads).
	snap Snapshot
	base Totals
	// The rest belongs to the partition's goroutine.
	accuracy  *window.Accuracy
	followed  *window.Mean // 1 for a prediction that followed the population model
	weights   *window.Mean
	populated bool
}

func newPublished() *published {
	return &published{accuracy: window.New(WindowSize), followed: window.NewMean(WindowSize), weights: window.NewMean(WindowSize)}
}

// start takes w as the worker whose counts from now on are the Runner's.
func (p *published) start(w *Worker, res Restored) {
	p.populated = w.cfg.Mixes()
	p.mu.Lock()
	p.base, p.snap.Totals = w.stats, w.stats
	p.snap.Phase, p.snap.Restore, p.snap.Keys = PhaseRunning, res, w.keyCount()
	p.mu.Unlock()
}

// phase publishes the Runner's phase.
func (p *published) phase(ph Phase) {
	p.mu.Lock()
	p.snap.Phase = ph
	p.mu.Unlock()
}

// before is what effect needs of the counters before a record.
type before struct{ events, labeled, mistakes, queries, alerts, predictions, followed int64 }

func countsOf(t *Totals) before {
	return before{t.Events, t.Labeled, t.Mistakes, t.Queries, t.Alerts, t.Predictions, t.FollowedPopulation}
}

// record publishes the counters after a record of topic topic whose
// fetch left lag records behind it (events topic only), and returns its
// effect.
func (p *published) record(w *Worker, b before, topic int, lag int64) Effect {
	t := &w.stats
	e := Effect{Events: t.Events - b.events, Labeled: t.Labeled - b.labeled, Mistakes: t.Mistakes - b.mistakes, Queries: t.Queries - b.queries, Alerts: t.Alerts - b.alerts}
	if e.Labeled > 0 {
		e.Outcome = w.last
		p.accuracy.Add(e.Outcome.Wrong)
	}
	if p.populated && t.Predictions > b.predictions {
		p.followed.Add(float64(t.FollowedPopulation - b.followed))
		p.weights.Add(w.lastWeight)
	}
	p.mu.Lock()
	p.snap.Totals = *t
	switch topic {
	case EventsTopic:
		p.snap.Lag = lag
	case LabelsTopic:
		p.snap.LabelsLag = lag
	}
	p.snap.WindowLabeled, p.snap.WindowAccuracy = p.accuracy.Len(), p.accuracy.Value()
	if p.populated {
		p.snap.PopulationPredictions = p.followed.Len()
		p.snap.PopulationShare, p.snap.PopulationWeight = p.followed.Value(), p.weights.Value()
	}
	p.mu.Unlock()
	return e
}

// keys publishes the partition's key counts.
func (p *published) keys(k KeyCount) {
	p.mu.Lock()
	p.snap.Keys = k
	p.mu.Unlock()
}

// get returns the last snapshot published.
func (p *published) get() Snapshot {
	p.mu.Lock()
	s, base := p.snap, p.base
	p.mu.Unlock()
	s.Totals = s.Totals.Since(base)
	return s
}

// KeyCount is how many keys a partition holds, and how many of them are in
// memory: fewer than Keys only with a key store (UseKeyStore), which holds
// the rest on disk.
type KeyCount struct{ Keys, Resident int }

func (w *Worker) keyCount() KeyCount { return KeyCount{Keys: w.Keys(), Resident: w.Resident()} }
