package keyed

import (
	"math/rand/v2"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/learners"
)

// State is everything a key owns. It is kept small (144 bytes): what
// only some keys use — events awaiting their labels, early labels, resets
// and alerts — hangs off pointers that stay nil until a key needs them.
// A State is made by Model.NewState (a key seen for the first time) or
// Model.Decode (a checkpointed key), and changed only by its Model.
type State struct {
	learner learners.Learner
	query   rand.PCG // margin-rule draws, for learners without a native rule
	// Applied is the last offset of each input (EventsTopic, LabelsTopic)
	// the key absorbed, checkpoint.NoOffset for none: a replayed record at
	// or below it is skipped. The holder sets it once a record is absorbed;
	// the Model reads the population model's to skip what it learned.
	Applied [2]int64
	stats   keyStats
	// wait holds the key's events awaiting their labels and its early
	// labels; nil until the first of either.
	wait *labelWait
	// watch holds the key's drift detectors.
	watch *watch
	// mix weighs the key's learner against the population model; nil
	// without a population model, else mixSpace (setMix).
	mix      *mixture
	mixSpace mixture
	std      *learners.Standardizer // nil unless Settings.Standardize
	// peers is, on the shared part's state with SharedAcrossPartitions,
	// the last offset it absorbed of each other partition's input topics
	// and their events awaiting a label (peer.go); nil otherwise.
	peers *peerOffsets
	// Mark is the holder's bookkeeping (package pipeline's: changed since
	// the last checkpoint, newer than the key store's copy); the Model
	// never reads or writes it.
	Mark Mark
}

// Mark is bookkeeping a State's holder keeps on it.
type Mark struct {
	// Dirty is set while the key waits for the next checkpoint.
	Dirty bool
	// Unstored is set, with a key store, while the state in memory is
	// newer than its record there (or it has none).
	Unstored bool
	// Slot is the holder's index of the key while Dirty (package
	// pipeline's: its place in the list of changed keys).
	Slot int32
	// Digest is the checkpoint.KeyRecord.Digest of the key's latest record
	// in the changelog (package pipeline's: what its next record replaces
	// in the marker's digest).
	Digest uint64
}

// setMix sets the key's mixture to m, held in the State itself: no
// allocation of its own, and read from the memory the key's other fields
// are in.
func (ks *State) setMix(m mixture) {
	ks.mixSpace = m
	ks.mix = &ks.mixSpace
}

// waiting returns the key's label wait, made on first use.
func (ks *State) waiting() *labelWait {
	if ks.wait == nil {
		ks.wait = &labelWait{awaited: map[string]awaitedID{}}
	}
	return ks.wait
}

// pending is the key's events awaiting their labels, oldest first.
func (ks *State) pending() []pending {
	if ks.wait == nil {
		return nil
	}
	return ks.wait.pending
}

// early is the key's labels waiting for their events, oldest first.
func (ks *State) early() []early {
	if ks.wait == nil {
		return nil
	}
	return ks.wait.early
}

// awaiting reports whether an event with id awaits its label.
func (ks *State) awaiting(id string) bool {
	if ks.wait == nil {
		return false
	}
	_, ok := ks.wait.awaited[id]
	return ok
}

// Awaiting is the number of the key's events awaiting their label.
func (ks *State) Awaiting() int { return len(ks.pending()) }

// NewState is the state of a key seen for the first time: its learner and
// margin rule draw from the key's own streams (and its learner starts as
// a copy of the mixture's population model when that leads).
func (m *Model) NewState(key string) (*State, error) {
	ks, err := m.blank(m.learnerConfig(key))
	if err != nil {
		return nil, err
	}
	if err := m.seed(ks.learner); err != nil {
		return nil, err
	}
	ks.query = learners.KeyStream(m.s.Seed, key+"\x00query")
	return ks, nil
}

// NewPopulation is the blank state of a partition's population model,
// kept under PopulationKey by the Model's Shared.
func (m *Model) NewPopulation() (*State, error) {
	ks, err := m.blank(learners.Config{Dim: m.s.Vector.Dim, Seed: m.s.Seed, Key: PopulationKey})
	if err != nil {
		return nil, err
	}
	ks.watch = nil // the population raises no alerts
	return ks, nil
}

// blank is a key's state with its learner built for lcfg and no margin
// stream. A restore fills every stream from the key's record (the learners'
// snapshots carry theirs: TestSnapshotCarriesEveryStream), so it builds
// unseeded: hashing each key twice was a fifth of decoding it.
func (m *Model) blank(lcfg learners.Config) (*State, error) {
	l, err := m.maker.New(lcfg)
	if err != nil {
		return nil, err
	}
	var ks *State
	if len(m.s.Detectors) == 1 { // the default: the State and its watch in one allocation
		b := &stateWithWatch{}
		ks = &b.State
		ks.watch = m.oneWatch(&b.watch)
	} else {
		ks = &State{watch: m.newWatch()}
	}
	ks.learner, ks.Applied = l, [2]int64{checkpoint.NoOffset, checkpoint.NoOffset}
	if m.s.Standardize {
		if ks.std, err = learners.NewStandardizer(m.s.Vector.Dim); err != nil {
			return nil, err
		}
	}
	return ks, nil
}

// stateWithWatch is a key's State and its watch of one detector (the
// default), allocated together: a new key is one allocation fewer, and
// the fields read at each of its events and checkpoints lie together in
// memory, where a partition of many keys misses the cache once instead of
// twice.
type stateWithWatch struct {
	State
	watch oneWatch
}

// newLearner is a fresh learner for key (a reset): drawing from the key's
// stream, or a copy of the population model when there is one.
func (m *Model) newLearner(key string) (learners.Learner, error) {
	l, err := m.maker.New(m.learnerConfig(key))
	if err == nil {
		err = m.seed(l)
	}
	return l, err
}

// learnerConfig is the configuration of key's learner: its streams are
// (Seed, key), or Seed's alone for an unkeyed stream (Settings.Unkeyed).
func (m *Model) learnerConfig(key string) learners.Config {
	if m.s.Unkeyed {
		key = ""
	}
	return learners.Config{Dim: m.s.Vector.Dim, Seed: m.s.Seed, Key: key}
}

// Learner is the key's learner, to read (a prediction, a snapshot): only
// the Model changes it.
func (ks *State) Learner() learners.Learner { return ks.learner }
