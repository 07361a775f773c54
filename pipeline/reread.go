package pipeline

import (
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/topics"
)

// A key's changelog record leaves out the inputs of its events awaiting
// their label that the events topic gives back (keyed's sourced inputs):
// they were written once, as input, and the marker of each checkpoint
// says how far back before its Through a restore reads the events topic
// again to get them (checkpoint.Marker.Reread). A restored worker first
// re-reads that stretch, whose records every key absorbed before the
// checkpoint: it only hands each record to its key (keyed.Model.Revisit),
// which takes the input back when it still awaits the event, and the
// partition's tracking of those offsets (keyed.Model.OldestSourced) is
// rebuilt as it goes. Until the replay has passed the restored marker,
// the tracking may lack offsets of keys not yet revisited, so the markers
// written meanwhile re-read from no later than the restored one did.

// reread is where a worker stands in re-reading the events topic after a
// restore.
type reread struct {
	// next is the events offset the re-reading reads next; the records
	// below keysFrom were absorbed by every key and are only revisited.
	next, keysFrom int64
	// floor is the oldest offset an awaited input not yet tracked may be
	// at (−1: none, and the worker re-reads nothing); until is the first
	// events offset past the restored marker: from there on the tracking
	// is exact, and reread ends.
	floor, until int64
	// selective is set after a restore from the changelog, whose states
	// lack every input to re-read: the records below keysFrom that the
	// model does not miss (keyed.Model.Missing) are passed over undecoded.
	selective bool
}

// noReread is a worker's reread when it re-reads nothing.
var noReread = reread{next: -1, keysFrom: -1, floor: -1, until: -1}

// startReread makes the worker re-read the events topic from floor (−1:
// nothing to re-read) for the awaited inputs of its keys, which absorbed
// every record below keysFrom, and forgets the offsets it tracked: the
// replay, which runs through until − 1 at least, tracks them again.
func (w *Worker) startReread(floor, keysFrom, until int64) {
	w.model.ForgetSourced()
	if floor < 0 || floor >= until {
		w.reread = noReread
		return
	}
	w.reread = reread{next: floor, keysFrom: keysFrom, floor: floor, until: until}
}

// revisit hands an events-topic record below reread.keysFrom, which its
// key absorbed before the checkpoint, to its key for the awaited input it
// may hold. A record that no key holds, or that does not decode, was never
// awaited: it is passed over without a dead letter (the first pass wrote
// it).
func (w *Worker) revisit(r Record) error {
	w.reread.next = r.Offset + 1
	w.stats.Skipped++
	if w.reread.selective && !w.model.Missing(r.Offset) {
		return nil // no state lacks its input
	}
	if len(r.Key) == 0 || len(r.Key) > w.cfg.MaxKeyLength {
		return nil
	}
	key := string(r.Key)
	ks, ok, err := w.lookup(key)
	if err != nil || !ok {
		return err // the key store failed: the partition restores
	}
	ev, err := w.decode(r)
	if err != nil {
		return nil
	}
	w.ev = ev // a field, as for Step: a local would escape
	w.refill(r, ks, &w.ev)
	return nil
}

// refill hands the key's model an events-topic record the key absorbed
// before: an awaited input it takes back makes the key differ from its
// stored copy, which the key store's record is then rewritten from.
func (w *Worker) refill(r Record, ks *keyed.State, ev *topics.Event) {
	if r.Topic != EventsTopic {
		return
	}
	if w.model.Revisit(keyed.Input{Key: string(r.Key), Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Event: ev}, ks) {
		ks.Mark.Unstored = true
	}
}

// rereadCount is a marker's Reread: how many events-topic records before
// the worker's Through[0] + 1 a restore reads again for the awaited inputs
// that the key records leave out.
func (w *Worker) rereadCount() int64 {
	oldest := w.model.OldestSourced()
	if w.reread.floor >= 0 && (oldest < 0 || w.reread.floor < oldest) {
		oldest = w.reread.floor
	}
	if oldest < 0 || oldest > w.through[EventsTopic] {
		return 0
	}
	return w.through[EventsTopic] + 1 - oldest
}

// Next is the offset per input topic the worker reads next: after the last
// record processed, or, while it re-reads the events topic for awaited
// inputs, the next record of that.
func (w *Worker) Next() [2]int64 {
	next := [2]int64{w.through[0] + 1, w.through[1] + 1}
	if w.reread.floor >= 0 && w.reread.next < w.reread.keysFrom { // still only re-reading
		next[EventsTopic] = min(next[EventsTopic], w.reread.next)
	}
	return next
}
