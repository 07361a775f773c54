package pipeline

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/driftstream/driftstream/learners"
)

// keyStats are a key's own counters, kept for inspection (Worker.Inspect)
// and checkpointed with the key, so that they survive a restore.
type keyStats struct {
	events, labeled, mistakes int64
	more                      *keyEvents // nil until the key's first reset or alert
}

// keyEvents are the counters of what happens to few keys, apart so that
// the others do not carry them.
type keyEvents struct {
	resets int64
	// alert is the key's last drift alert; detector is its Config.Detectors
	// index + 1 (0: none yet).
	alertDetector  int
	alertOffset    int64
	alertTimestamp int64 // Unix nanoseconds; 0: the event had no time
}

// rare returns the key's reset and alert counters (zero when none),
// which the caller may only read.
func (s *keyStats) rare() keyEvents {
	if s.more == nil {
		return keyEvents{}
	}
	return *s.more
}

// rareForUpdate returns the key's reset and alert counters, made on first use.
func (s *keyStats) rareForUpdate() *keyEvents {
	if s.more == nil {
		s.more = &keyEvents{}
	}
	return s.more
}

// KeyInfo is what the worker can tell about one of its keys: the answer of
// the service's GET /v1/keys/{key}.
type KeyInfo struct {
	Key       string `json:"key"`
	Partition int    `json:"partition"`
	Learner   string `json:"learner"`
	// Params are the learner's parameters: the configured ones over the
	// catalog's defaults (a default derived from the dimension is shown as
	// its formula).
	Params map[string]any `json:"params"`
	// Events counts the key's events, Labeled those scored against their
	// label (inline or delayed), Mistakes the wrong ones among them.
	Events   int64 `json:"events"`
	Labeled  int64 `json:"labeled"`
	Mistakes int64 `json:"mistakes"`
	// Accuracy is 1 − Mistakes/Labeled; nil before the first label.
	Accuracy *float64 `json:"accuracy"`
	// AwaitingLabels counts the key's events that still await their label;
	// PendingQueries those of them the learner asked for.
	AwaitingLabels int `json:"awaiting_labels"`
	PendingQueries int `json:"pending_queries"`
	// EarlyLabels counts labels-topic labels waiting for their event.
	EarlyLabels int `json:"early_labels"`
	// AppliedOffsets is the last offset of each input topic the key absorbed
	// (−1: none).
	AppliedOffsets AppliedOffsets `json:"applied_offsets"`
	// StateBytes is the size of the key's checkpoint record.
	StateBytes int `json:"state_bytes"`
	// Resets counts the key's learner restarts (on drift, or asked for).
	Resets    int64 `json:"resets"`
	InWarning bool  `json:"in_warning"`
	// LastDriftAlert is the key's last drift alert; nil when it has none.
	LastDriftAlert *AlertInfo `json:"last_drift_alert"`
	// Follows, with a population model, says whose prediction the key makes
	// ("population" or "own"), and PopulationWeight is the population's
	// weight in the key's mixture (the key's learner has the rest); both
	// absent without a population model.
	Follows          string   `json:"follows,omitempty"`
	PopulationWeight *float64 `json:"population_weight,omitempty"`
}

// AppliedOffsets are a key's last absorbed offsets per input topic.
type AppliedOffsets struct {
	Events int64 `json:"events"`
	Labels int64 `json:"labels"`
}

// AlertInfo identifies a drift alert.
type AlertInfo struct {
	Offset   int64  `json:"offset"`
	Detector string `json:"detector"`
	Signal   string `json:"signal"`
	TS       string `json:"ts,omitempty"`
}

// Inspect describes key; false when the worker does not hold it. The error
// is the key store's (UseKeyStore), which a key not in memory is read from.
// Call it from the worker's goroutine (Runner.Do).
func (w *Worker) Inspect(key string) (KeyInfo, bool, error) {
	ks, ok, err := w.lookup(key)
	if !ok || err != nil {
		return KeyInfo{}, false, err
	}
	s := &ks.stats
	info := KeyInfo{Key: key, Partition: w.partition, Learner: w.cfg.Learner, Params: w.params(),
		Events: s.events, Labeled: s.labeled, Mistakes: s.mistakes, Resets: s.rare().resets,
		AwaitingLabels: len(ks.pending()), EarlyLabels: len(ks.early()),
		AppliedOffsets: AppliedOffsets{Events: ks.applied[EventsTopic], Labels: ks.applied[LabelsTopic]},
		InWarning:      ks.watch != nil && slices.Contains(ks.watch.warns, true)}
	for _, p := range ks.pending() {
		if p.queried {
			info.PendingQueries++
		}
	}
	if s.labeled > 0 {
		a := 1 - float64(s.mistakes)/float64(s.labeled)
		info.Accuracy = &a
	}
	if b, err := encodeState(ks); err == nil {
		info.StateBytes = len(b)
	}
	if w.mixing() && key != PopulationKey {
		m := mixture{population: mixStart, own: 1 - mixStart} // before its first event
		if ks.mix != nil {
			m = *ks.mix
		}
		info.Follows, info.PopulationWeight = "own", &m.population
		if m.followsPopulation() {
			info.Follows = "population"
		}
	}
	if rare := s.rare(); rare.alertDetector > 0 {
		d := w.cfg.Detectors[rare.alertDetector-1]
		info.LastDriftAlert = &AlertInfo{Offset: rare.alertOffset, Detector: d.Detector, Signal: d.Signal}
		if rare.alertTimestamp != 0 {
			info.LastDriftAlert.TS = time.Unix(0, rare.alertTimestamp).UTC().Format(time.RFC3339Nano)
		}
	}
	return info, true, nil
}

// params are the learner's effective parameters.
func (w *Worker) params() map[string]any {
	out := map[string]any{}
	if info, err := learners.Lookup(w.cfg.Learner); err == nil {
		for _, p := range info.Params {
			out[p.Name] = p.Default
		}
	}
	if len(w.cfg.Params) > 0 {
		_ = json.Unmarshal(w.cfg.Params, &out) // validated with the configuration
	}
	return out
}

// Reset restarts key's learner and drift detectors, as a fresh key's, and
// marks the key for the next checkpoint; its pending queries stay (their
// labels teach the new learner). False when the worker does not hold key
// (or key is PopulationKey).
// Call it from the worker's goroutine (Runner.Do, which checkpoints before
// it answers, so that a restore sees the reset).
func (w *Worker) Reset(key string) (bool, error) {
	if key == PopulationKey {
		return false, nil // not an entity's: the population model is not reset by hand
	}
	ks, ok, err := w.lookup(key)
	if !ok || err != nil {
		return false, err
	}
	fresh, err := w.newKey(key) // the learner and detectors a new key gets
	if err != nil {
		return false, err
	}
	w.unwarn(ks)
	ks.learner, ks.watch, ks.mix = fresh.learner, fresh.watch, nil // a new key's: it follows the population again
	ks.stats.rareForUpdate().resets++
	w.stats.Resets++
	w.markDirty(key, ks)
	return true, nil
}
