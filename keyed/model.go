package keyed

import (
	"fmt"
	"math"

	"github.com/driftstream/driftstream/drift"
	"github.com/driftstream/driftstream/learners"
)

// Input topics, as indexes into a State's Applied offsets: where a record
// came from.
const (
	EventsTopic = 0
	LabelsTopic = 1
)

// Shared is where a Model finds the partition's population model, which
// it keeps as a key of its own (PopulationKey): the holder's key map, so
// that the model is checkpointed, restored, evicted and replayed exactly
// as keys are. A Model calls it only when its Settings keep a population
// model.
type Shared interface {
	// Population returns the population model's state, made with
	// Model.NewPopulation (and marked changed) on first use. An error is
	// the holder's (its key store failed).
	Population() (*State, error)
	// PopulationChanged records that the population model's state changed
	// since the last checkpoint.
	PopulationChanged(ps *State)
}

// Model is a partition's per-key learning: it turns one decoded record and
// the state of the record's key into one Step (Model.Step), and owns what
// every key of the partition shares — the learners' parameters, the
// detectors' configuration and, through Shared, the population model. It
// holds no key: its caller looks keys up and keeps them. Like the Worker
// that holds it, it is not safe for concurrent use.
type Model struct {
	s     Settings
	maker *learners.Maker // the keys' learners, parameters decoded once
	// detectors make the keys' drift detectors, one per Settings.Detectors,
	// parameters decoded once.
	detectors []*drift.Maker
	sampling  bool // the learner has its own query rule
	populate  bool // a population model (Settings.Population)
	additive  bool // the additive one (PopulationAdditive)
	learnAll  bool // every label teaches (Settings.LearnFrom)
	shared    Shared
	stats     *Totals
	step      Step  // the step being made, reused (its alerts' backing array too)
	round     round // the event being predicted (event), reused
	// sourced holds the offsets of the keys' awaited events whose inputs
	// their changelog records leave out (sourced.go).
	sourced offsetSet
	// missing holds, while collect is set (a restore) and until the re-read
	// that follows is done, the offsets of the sourced inputs the decoded
	// states lack (CollectMissing).
	missing missingInputs
	collect bool
	// identity is the keys' learners' snapshot identity (name, dimension,
	// parameters), which key states since version 6 leave out and name by
	// its hash (codec.go).
	identity     []byte
	identityHash uint64
	scratch      []byte // a learner's snapshot put back together (Decode)
}

// New returns the model of a partition with settings s (validated, then
// given their defaults), counting into stats; shared holds its population
// model (nil when s keeps none).
func New(s Settings, shared Shared, stats *Totals) (*Model, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.WithDefaults()
	if s.Population != PopulationOff && shared == nil {
		return nil, fmt.Errorf("population %s: the model needs a holder for it (Shared)", s.Population)
	}
	if stats == nil {
		return nil, fmt.Errorf("keyed.New: nil counters")
	}
	info, _ := learners.Lookup(s.Learner)
	maker, err := learners.NewMaker(s.Learner, s.Params, s.Vector.Dim)
	if err != nil {
		return nil, err
	}
	detectors := make([]*drift.Maker, len(s.Detectors))
	for i, d := range s.Detectors {
		if detectors[i], err = drift.NewMaker(d.Detector, d.Params); err != nil {
			return nil, fmt.Errorf("drift detector %d: %w", i, err)
		}
	}
	identity, err := snapshotIdentity(maker, s.Vector.Dim)
	if err != nil {
		return nil, err
	}
	return &Model{s: s, maker: maker, detectors: detectors, sampling: info.Sampling, populate: s.Population != PopulationOff,
		additive: s.Population == PopulationAdditive, learnAll: s.LearnFrom == LearnAll, shared: shared, stats: stats,
		identity: identity, identityHash: identityHash(identity)}, nil
}

// Settings are the model's settings, with their defaults.
func (m *Model) Settings() Settings { return m.s }

// guardNorm is the input norm above which a learning step is checked:
// below it (so every value is below it too) no learner's update can
// overflow from a finite state in one step; above it the state is
// snapshotted, and restored if the step made the learner's margin on x
// non-finite. The norm, not the largest value: one SIMD dot product
// (gonum's) costs a thirtieth of a scan through Vector.Entries
// (BenchmarkVectorChecks, learners, measures both).
const guardNorm = 1e6

// learn teaches the key's learner, leaving its state untouched when the step
// would make it non-finite (the learners' contract: on error, no change).
func (m *Model) learn(ks *State, x learners.Vector, y int, p learners.Prediction) error {
	return guarded(ks, x, func() error { return ks.learner.Learn(x, y, p) })
}

// guarded runs step, a learning step of ks's learner on x, leaving the
// state untouched when it would make it non-finite.
func guarded(ks *State, x learners.Vector, step func() error) error {
	sq := x.SquaredNorm()
	if sq <= guardNorm*guardNorm {
		return step()
	}
	before, err := ks.learner.MarshalBinary()
	if err != nil {
		return err
	}
	if err := step(); err != nil {
		return err
	}
	if q, err := ks.learner.Predict(x); err != nil || math.IsNaN(q.Score) || math.IsInf(q.Score, 0) {
		if uerr := ks.learner.UnmarshalBinary(before); uerr != nil {
			return fmt.Errorf("restore the state after a non-finite step: %w", uerr)
		}
		return fmt.Errorf("learning from this record (an input of norm %g) would make the learner's state non-finite; the key's state is unchanged: scale the inputs", math.Sqrt(sq))
	}
	return nil
}
