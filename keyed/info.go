package keyed

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/driftstream/driftstream/learners"
)

// keyStats are a key's own counters, kept for inspection (Model.Info)
// and checkpointed with the key, so that they survive a restore.
type keyStats struct {
	events, labeled, mistakes int64
	more                      *keyEvents // nil until the key's first reset or alert
}

// keyEvents are the counters of what happens to few keys, apart so that
// the others do not carry them.
type keyEvents struct {
	resets int64
	// alert is the key's last drift alert; detector is its Settings.Detectors
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

// KeyInfo is what a model can tell about one of its keys: the answer of
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
	// SharedPart, with the additive population model, says whether the
	// key's prediction adds the shared part (false: the key is a learner of
	// its own, chosen at its first event by the partition's prior); absent
	// before the key's first event and without the additive model.
	SharedPart *bool `json:"shared_part,omitempty"`
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

// Info describes key, whose state is ks, held by the given partition:
// the key API's answer.
func (m *Model) Info(key string, partition int, ks *State) KeyInfo {
	s := &ks.stats
	info := KeyInfo{Key: key, Partition: partition, Learner: m.s.Learner, Params: m.params(),
		Events: s.events, Labeled: s.labeled, Mistakes: s.mistakes, Resets: s.rare().resets,
		AwaitingLabels: len(ks.pending()), EarlyLabels: len(ks.early()),
		AppliedOffsets: AppliedOffsets{Events: ks.Applied[EventsTopic], Labels: ks.Applied[LabelsTopic]},
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
	if b, err := ks.MarshalChangelog(); err == nil {
		info.StateBytes = len(b)
	}
	if m.mixing() && key != PopulationKey {
		mx := mixture{population: MixtureStart, own: 1 - MixtureStart} // before its first event
		if ks.mix != nil {
			mx = *ks.mix
		}
		info.Follows, info.PopulationWeight = "own", &mx.population
		if mx.followsPopulation() {
			info.Follows = "population"
		}
	}
	if m.additive && key != PopulationKey && ks.mix != nil {
		takes := ks.mix.population == 1
		info.SharedPart = &takes
	}
	if rare := s.rare(); rare.alertDetector > 0 {
		d := m.s.Detectors[rare.alertDetector-1]
		info.LastDriftAlert = &AlertInfo{Offset: rare.alertOffset, Detector: d.Detector, Signal: d.Signal}
		if rare.alertTimestamp != 0 {
			info.LastDriftAlert.TS = time.Unix(0, rare.alertTimestamp).UTC().Format(time.RFC3339Nano)
		}
	}
	return info
}

// params are the learner's effective parameters.
func (m *Model) params() map[string]any {
	out := map[string]any{}
	if info, err := learners.Lookup(m.s.Learner); err == nil {
		for _, p := range info.Params {
			out[p.Name] = p.Default
		}
	}
	if len(m.s.Params) > 0 {
		_ = json.Unmarshal(m.s.Params, &out) // validated with the settings
	}
	return out
}

// Reset restarts the learner and drift detectors of key, whose state is
// ks, as a fresh key's; its pending events stay (their labels teach the
// new learner). The holder keeps ks for the next checkpoint.
func (m *Model) Reset(key string, ks *State) error {
	fresh, err := m.NewState(key) // the learner and detectors a new key gets
	if err != nil {
		return err
	}
	m.Release(ks)
	ks.learner, ks.watch, ks.mix = fresh.learner, fresh.watch, nil // a new key's: it follows the population again
	ks.stats.rareForUpdate().resets++
	m.stats.Resets++
	return nil
}
