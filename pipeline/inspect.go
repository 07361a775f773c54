package pipeline

import "github.com/driftstream/driftstream/keyed"

// KeyInfo is what a worker can tell about one of its keys (keyed's).
type KeyInfo = keyed.KeyInfo

// Inspect describes key; false when the worker does not hold it. The error
// is the key store's (UseKeyStore), which a key not in memory is read from.
// Call it from the worker's goroutine (Runner.Do).
func (w *Worker) Inspect(key string) (KeyInfo, bool, error) {
	ks, ok, err := w.lookup(key)
	if !ok || err != nil {
		return KeyInfo{}, false, err
	}
	return w.model.Info(key, w.partition, ks), true, nil
}

// Reset restarts key's learner and drift detectors, as a fresh key's, and
// marks the key for the next checkpoint; its pending events stay (their
// labels teach the new learner). False when the worker does not hold key
// (or key is keyed.PopulationKey).
// Call it from the worker's goroutine (Runner.Do, which checkpoints before
// it answers, so that a restore sees the reset).
func (w *Worker) Reset(key string) (bool, error) {
	if key == keyed.PopulationKey {
		return false, nil // not an entity's: the population model is not reset by hand
	}
	ks, ok, err := w.lookup(key)
	if !ok || err != nil {
		return false, err
	}
	if err := w.model.Reset(key, ks); err != nil {
		return false, err
	}
	w.markDirty(key, ks)
	return true, nil
}
