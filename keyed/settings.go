package keyed

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

// Settings configure how every key of a partition learns: its learner, its
// label wait, its drift watch and the partition's population model. The
// zero value of each field means its default (WithDefaults).
type Settings struct {
	Learner string
	Params  json.RawMessage
	Seed    uint64
	Vector  topics.Vectorizer
	// QueryScale is b of the margin rule b/(b+|score|) that asks for labels of
	// unlabeled events for learners without a native query rule; 0 never asks.
	QueryScale float64
	// MaxPending bounds the unlabeled events awaiting their label per key
	// (oldest dropped, counted as expired); 0 means DefaultMaxPending.
	MaxPending int
	// PendingTTL gives up an awaited label after this many later input
	// records of its partition (an offset distance: deterministic on
	// replay); 0 means DefaultPendingTTL.
	PendingTTL int64
	// MaxPendingBytes bounds the bytes of a key's pending events and early
	// labels together (oldest dropped first, counted as expired); 0 means
	// DefaultMaxPendingBytes. With the learner's state it bounds a key record.
	MaxPendingBytes int
	// Detectors are the drift detectors run per key (package drift), each on
	// one signal; none by default.
	Detectors []DetectorSpec
	// OnDrift is what a confirmed drift does: OnDriftAlert (the default)
	// emits an alert, OnDriftReset also restarts the key's learner.
	OnDrift string
	// AlertCooldown is how many of a key's events without a detection
	// close its open incident, if its signal has not come back near its
	// reference before (0: DefaultAlertCooldown). Detections while an
	// incident is open join it and raise no alert.
	AlertCooldown int64
	// AlertMinRise is the least rise of a detection's signal, its mean over
	// the recent window (RecentWindow values) less its mean over the
	// reference window before it (ReferenceWindow), for the detection to
	// open an incident (0: DefaultAlertMinRise; NoMinRise: every detection
	// of a key with no open incident does).
	AlertMinRise float64
	// AlertResolved writes a record with Kind AlertResolved when an
	// incident closes.
	AlertResolved bool
	// IncidentPerDetector gives each detector an incident of its own
	// (scoring detectors side by side) rather than one to the key.
	IncidentPerDetector bool
	// Standardize z-scores each key's inputs by the running statistics of
	// that key's earlier inputs (learners.Standardizer, checkpointed with the
	// key) before its learner sees them; dense inputs only.
	Standardize bool
	// Unkeyed seeds every key's learner from Seed alone (learners.Config
	// with no Key), as a learner run outside the pipeline is seeded: a
	// backtest of one stream without entity keys (a paper's stream, which
	// the pass files under one key) draws what that learner draws. Off, as
	// in the service, each key's learner draws from (Seed, key).
	Unkeyed bool
	// Population is the partition's population model (population.go):
	// PopulationAdditive (a shared part that every key's prediction adds
	// to its own), PopulationMixture or the keys' learner's name (a per-key
	// weighted majority of the key's learner and a population learner that
	// seeds new keys), or PopulationOff (the default; "" means it).
	Population string
	// LearnFrom says which labels teach a key: LearnAll (the default; ""
	// means it), every label that reaches the key, or LearnQueried, only
	// those its learner asked for (the selective-sampling papers'
	// protocol, which their reproductions use). Learners that are not
	// samplers ask for every label, so it changes only samplers.
	LearnFrom string
	// AwaitedInputs is where a key's checkpoint finds the inputs of its
	// events awaiting their label: AwaitedFromEvents (the default; ""
	// means it), the events topic, which a restore re-reads from the
	// oldest of them (sourced.go), so that a key's changelog record holds
	// none; or AwaitedInChangelog, the key's changelog record, written
	// again at every checkpoint of the key while the event waits — for an
	// events topic whose retention is shorter than the labels' delays.
	// Standardized inputs are always in the changelog record.
	AwaitedInputs string
	// SharedAcrossPartitions has the additive model's shared part learn,
	// besides its own partition's labels, every label of the other
	// partitions' events (inline, or joined to their label records), at
	// its own margin (Model.Peer): one
	// shared part across partitions, which a deployment with few keys per
	// partition needs (docs/LEARNING.md). It needs PopulationAdditive and
	// raw inputs (not Standardize: the other partitions' keys' statistics
	// are not here).
	SharedAcrossPartitions bool
}

// Where a key's checkpoint finds its awaited inputs (Settings.AwaitedInputs).
const (
	AwaitedFromEvents  = "events"
	AwaitedInChangelog = "changelog"
)

// Which labels teach a key (Settings.LearnFrom).
const (
	LearnAll     = "all"
	LearnQueried = "queried"
)

// The defaults of the bounds in Settings, the same for the service
// (config's DRIFTSTREAM_MAX_PENDING, DRIFTSTREAM_PENDING_TTL and
// DRIFTSTREAM_MAX_PENDING_BYTES) and the backtests.
const (
	DefaultMaxPending      = 1000
	DefaultPendingTTL      = 1_000_000
	DefaultMaxPendingBytes = 128 << 10
)

// WithDefaults returns s with each unset (zero) field given its default.
// KeysDepend reports whether a partition's keys depend on one another
// through a population model's part shared by the partition: its state is
// then exact only as one cut of the partition, every key and the shared
// part as of the same checkpoint, and a key that replays from another
// offset than the rest diverges.
func (s Settings) KeysDepend() bool {
	return s.Population != "" && s.Population != PopulationOff
}

func (s Settings) WithDefaults() Settings {
	if s.MaxPendingBytes == 0 {
		s.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if s.MaxPending == 0 {
		s.MaxPending = DefaultMaxPending
	}
	if s.PendingTTL == 0 {
		s.PendingTTL = DefaultPendingTTL
	}
	if s.OnDrift == "" {
		s.OnDrift = OnDriftAlert
	}
	if s.AlertCooldown == 0 {
		s.AlertCooldown = DefaultAlertCooldown
	}
	if s.AlertMinRise == 0 {
		s.AlertMinRise = DefaultAlertMinRise
	}
	if s.Population == "" {
		s.Population = PopulationOff
	}
	if s.LearnFrom == "" {
		s.LearnFrom = LearnAll
	}
	if s.AwaitedInputs == "" {
		s.AwaitedInputs = AwaitedFromEvents
	}
	return s
}

// Validate checks the settings as WithDefaults completes them, and
// changes nothing.
func (s Settings) Validate() error {
	d := s.WithDefaults()
	return d.check()
}

// check validates settings with their defaults.
func (s *Settings) check() error {
	if s.MaxPendingBytes < 0 {
		return fmt.Errorf("max pending bytes %d: must be positive", s.MaxPendingBytes)
	}
	if s.Standardize && s.Vector.Hasher != nil && s.Vector.DenseDim == 0 {
		return errors.New("standardize needs dense inputs (\"x\"): hashed named features would all become dense; scale them at the producer, or set a dense dimension")
	}
	if s.LearnFrom != LearnAll && s.LearnFrom != LearnQueried {
		return fmt.Errorf("learn from %q: %s (every label that reaches a key) or %s (only the labels its learner asked for)", s.LearnFrom, LearnAll, LearnQueried)
	}
	if s.AwaitedInputs != AwaitedFromEvents && s.AwaitedInputs != AwaitedInChangelog {
		return fmt.Errorf("awaited inputs %q: %s (re-read from the events topic after a restore) or %s (written with the key at each of its checkpoints)", s.AwaitedInputs, AwaitedFromEvents, AwaitedInChangelog)
	}
	if err := s.validateDetectors(); err != nil {
		return err
	}
	l, err := learners.New(s.Learner, s.Params, learners.Config{Dim: s.Vector.Dim})
	if err != nil {
		return err
	}
	if err := s.validatePopulation(l); err != nil {
		return err
	}
	if s.SharedAcrossPartitions && (s.Population != PopulationAdditive || s.Standardize) {
		return fmt.Errorf("a shared part across partitions needs population %s (it is that model's shared part) and standardize off (the other partitions' keys' input statistics are not here); population is %s, standardize %t",
			PopulationAdditive, s.Population, s.Standardize)
	}
	switch {
	case s.QueryScale < 0 || math.IsNaN(s.QueryScale):
		return fmt.Errorf("query scale %v: must be ≥ 0 (0 = never query)", s.QueryScale)
	case s.MaxPending < 0:
		return fmt.Errorf("max pending %d: must be ≥ 0", s.MaxPending)
	case s.PendingTTL < 0:
		return fmt.Errorf("pending TTL %d: must be ≥ 0", s.PendingTTL)
	}
	return nil
}
