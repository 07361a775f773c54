package checkpoint

import "fmt"

// A checkpoint counts only once its marker is in. Its key records are
// written before its marker, and a store may write them in several requests
// (KafkaStore sends at most its batch limit at a time), so a writer that
// stops in the middle — a kill -9, a lost connection — leaves some of them
// durable with no marker after them: a torn checkpoint. Such records are
// each the exact state of their key at its applied_through, but not the
// state of the partition at any marker: with a population model the keys
// depend on one another through the shared part (written first, as the key
// "\x00population" sorts first), so one key ahead of the marker makes every
// key that replays from the marker diverge.
//
// Hence the invariant every reader of the log keeps: state is read only up
// to a marker. A key record is used only when an accepted marker of its
// writer (its epoch) follows it. Reading in log order, the records since the
// last accepted marker of their epoch form the open window:
//
//   - a key that held no record before the window (fresh) is handed to the
//     sink at once, as it costs nothing to take back: in a compacted log,
//     where the cleaner removed every marker of an epoch but its last, the
//     window holds all the epoch's keys, and holding their records would
//     hold the whole log;
//   - a record of a key that held one before is held back (pending) until
//     the marker, so that the key keeps its earlier record if the window
//     tears: at most one checkpoint's records, as every checkpoint's own
//     marker is in the log until the cleaner reaches it;
//   - an accepted marker of the window's epoch commits the window: the
//     pending records are handed to the sink in log order;
//   - an ownership claim of a newer epoch, a record or marker of another
//     epoch, or the end of what is read tears the window: its pending
//     records are dropped, its fresh keys handed back as holding nothing,
//     and the checkpoint is reported in Snapshot.Torn, so that the reader
//     marks its keys changed and its next checkpoint supersedes the torn
//     records.
//
// A fresh key's record torn after the cleaner removed the key's earlier
// record (which the torn one superseded) cannot be told from a new key's:
// it is handed back as holding nothing. The marker's digest (digest.go)
// still counts the removed record, so the restore does not verify, and its
// reader does not use it. The window for that is narrow (the torn records
// must leave the active segment and the cleaner must run before the next
// owner's first checkpoint rewrites the key).

// TornCheckpoint is a checkpoint whose key records were read without the
// marker that would close it: its writer stopped while writing it. Its
// records were set aside.
type TornCheckpoint struct {
	// Epoch is the writer's epoch.
	Epoch Epoch
	// First and Last are the store positions of its first and last records
	// read (offsets in a Kafka changelog).
	First, Last int64
	// Records counts the key records set aside.
	Records int
	// Keys are the keys of those records: each keeps its record from before
	// the checkpoint (or holds nothing when it had none), and the reader
	// writes it again at its next checkpoint.
	Keys []string
}

func (t TornCheckpoint) String() string {
	return fmt.Sprintf("a checkpoint of epoch %v with no marker: %d key records at positions %d–%d set aside", t.Epoch, t.Records, t.First, t.Last)
}

// window is the open window of a snapshot being read: the key records read
// since the last accepted marker of their epoch.
type window struct {
	epoch       Epoch
	first, last int64
	n           int
	// pending are the records of keys that held a record before the window,
	// in log order; at indexes them by key.
	pending []*KeyRecord
	at      map[string]int
	// fresh are the keys first met in the window, handed to the sink (their
	// names only: a compacted log's window holds every key of an epoch).
	fresh     []string
	partition int
}

// open reports whether the window holds records.
func (w *window) open() bool { return w.n > 0 }

// reset empties the window, keeping its buffers.
func (w *window) reset() {
	clear(w.pending)
	clear(w.fresh)
	w.pending, w.fresh, w.n = w.pending[:0], w.fresh[:0], 0
	clear(w.at)
}

// hold adds an accepted key record at position pos to the window: pending
// when its key held a record before, handed to the sink otherwise.
func (s *Snapshot) hold(pos int64, rec *KeyRecord) {
	w := &s.win
	if w.open() && w.epoch != rec.Epoch {
		s.tear() // a record of another writer: the window's never got its marker
	}
	if !w.open() {
		w.epoch, w.partition, w.first = rec.Epoch, rec.Partition, pos
	}
	w.last = pos
	w.n++
	if i, ok := w.at[rec.Key]; ok {
		w.pending[i] = rec
		return
	}
	if !s.has(rec.Key) && !s.corrupt(rec.Key) {
		w.fresh = append(w.fresh, rec.Key)
		s.put(rec)
		return
	}
	if w.at == nil {
		w.at = map[string]int{}
	}
	w.at[rec.Key] = len(w.pending)
	w.pending = append(w.pending, rec)
}

// commit closes the window with an accepted marker of epoch e: its records
// become the keys' records. A window of another epoch is torn instead.
func (s *Snapshot) commit(e Epoch) {
	w := &s.win
	if !w.open() {
		return
	}
	if w.epoch != e {
		s.tear()
		return
	}
	for _, rec := range w.pending {
		s.put(rec)
	}
	w.reset()
}

// tear sets the open window aside as a torn checkpoint.
func (s *Snapshot) tear() {
	w := &s.win
	if !w.open() {
		return
	}
	t := TornCheckpoint{Epoch: w.epoch, First: w.first, Last: w.last, Records: w.n, Keys: make([]string, 0, len(w.fresh)+len(w.pending))}
	for _, key := range w.fresh {
		s.forget(key)
		t.Keys = append(t.Keys, key)
	}
	for _, rec := range w.pending {
		t.Keys = append(t.Keys, rec.Key)
	}
	s.Torn = append(s.Torn, t)
	w.reset()
}

// forget hands a fresh key back as holding nothing: an empty record, as a
// key that the pipeline wrote holding nothing has.
func (s *Snapshot) forget(key string) {
	w := &s.win
	s.keep(&KeyRecord{Partition: w.partition, Key: key, Epoch: w.epoch, AppliedThrough: [2]int64{NoOffset, NoOffset}})
}

// corrupt reports whether the key has an unusable record that holds replay
// back: a record taking its place must not be taken back to nothing.
func (s *Snapshot) corrupt(key string) bool {
	for _, c := range s.Corrupt {
		if c.Key == key {
			return true
		}
	}
	return false
}

// end finishes a read of the log: a window still open is a torn
// checkpoint. Every Store's Load and LoadRange calls it last.
func (s *Snapshot) end() { s.tear() }
