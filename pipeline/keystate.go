package pipeline

import (
	"math/rand/v2"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/learners"
)

// keyState is everything a key owns. It is kept small (112 bytes): what
// only some keys use — events awaiting their labels, early labels, resets
// and alerts — hangs off pointers that stay nil until a key needs them.
type keyState struct {
	learner learners.Learner
	query   rand.PCG // margin-rule draws, for learners without a native rule
	applied [2]int64
	stats   keyStats
	// wait holds the key's events awaiting their labels and its early
	// labels; nil until the first of either.
	wait *labelWait
	// watch holds the key's drift detectors.
	watch *watch
	// mix weighs the key's learner against the population model; nil
	// without a population model.
	mix *mixture
	std *learners.Standardizer // nil unless Config.Standardize
	// dirty is set while the key is in Worker.dirty: changed since the last
	// checkpoint.
	dirty bool
	// unstored is set, with a key store, while the key's state in memory is
	// newer than its record there (or it has none): evicting it writes it.
	unstored bool
}

// waiting returns the key's label wait, made on first use.
func (ks *keyState) waiting() *labelWait {
	if ks.wait == nil {
		ks.wait = &labelWait{awaited: map[string]int32{}}
	}
	return ks.wait
}

// pending is the key's events awaiting their labels, oldest first.
func (ks *keyState) pending() []pending {
	if ks.wait == nil {
		return nil
	}
	return ks.wait.pending
}

// early is the key's labels waiting for their events, oldest first.
func (ks *keyState) early() []early {
	if ks.wait == nil {
		return nil
	}
	return ks.wait.early
}

// awaiting reports whether an event with id awaits its label.
func (ks *keyState) awaiting(id string) bool { return ks.wait != nil && ks.wait.awaited[id] > 0 }

// newKey is the state of a key seen for the first time: its learner and
// margin rule draw from the key's own streams.
func (w *Worker) newKey(key string) (*keyState, error) {
	ks, err := w.blankKey(w.learnerConfig(key))
	if err != nil {
		return nil, err
	}
	if err := w.seed(ks.learner); err != nil {
		return nil, err
	}
	ks.query = learners.KeyStream(w.cfg.Seed, key+"\x00query")
	return ks, nil
}

// blankKey is a key's state with its learner built for lcfg and no margin
// stream. A restore fills every stream from the key's record (the learners'
// snapshots carry theirs: TestSnapshotCarriesEveryStream), so it builds
// unseeded: hashing each key twice was a fifth of decoding it.
func (w *Worker) blankKey(lcfg learners.Config) (*keyState, error) {
	l, err := w.maker.New(lcfg)
	if err != nil {
		return nil, err
	}
	wt, err := w.newWatch()
	if err != nil {
		return nil, err
	}
	ks := &keyState{learner: l, watch: wt, applied: [2]int64{checkpoint.NoOffset, checkpoint.NoOffset}}
	if w.cfg.Standardize {
		if ks.std, err = learners.NewStandardizer(w.cfg.Vector.Dim); err != nil {
			return nil, err
		}
	}
	return ks, nil
}

// newLearner is a fresh learner for key (a reset): drawing from the key's
// stream, or a copy of the population model when there is one.
func (w *Worker) newLearner(key string) (learners.Learner, error) {
	l, err := w.maker.New(w.learnerConfig(key))
	if err == nil {
		err = w.seed(l)
	}
	return l, err
}

// learnerConfig is the configuration of key's learner: its streams are
// (Seed, key), or Seed's alone for an unkeyed stream (Config.Unkeyed).
func (w *Worker) learnerConfig(key string) learners.Config {
	if w.cfg.Unkeyed {
		key = ""
	}
	return learners.Config{Dim: w.cfg.Vector.Dim, Seed: w.cfg.Seed, Key: key}
}
