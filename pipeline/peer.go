package pipeline

import (
	"fmt"
	"slices"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
)

// A shared part across partitions (keyed.Settings.SharedAcrossPartitions):
// the partition's Source also delivers the other partitions' records of the
// input topics, merged with its own by record timestamp (Merge), and the
// worker hands each to its shared part (keyed.Model.Peer). They make no
// output and touch no key: their own partition predicts, dead-letters and
// checkpoints them. The worker keeps the last offset it processed of each
// (Peers), which its checkpoint marker records (checkpoint.Marker.Peers) so
// that a restore resumes their reading at the cut the marker closed, as it
// resumes its own topics; the shared part skips what it absorbed before its
// own checkpoint record.

// peerInput stands for the input of a record of another partition where
// an input topic's index is expected (the partition's lag ignores it).
const peerInput = -1

// peer processes r, a record of another partition.
func (w *Worker) peer(r Record) error {
	if !w.cfg.SharedAcrossPartitions {
		return fmt.Errorf("worker of partition %d got a record of partition %d (the shared part across partitions is off)", w.partition, r.Partition)
	}
	if r.Partition < 0 {
		return fmt.Errorf("worker of partition %d got a record of partition %d", w.partition, r.Partition)
	}
	for len(w.peers) <= r.Partition {
		w.peers = append(w.peers, [2]int64{checkpoint.NoOffset, checkpoint.NoOffset})
	}
	w.peers[r.Partition][r.Topic] = max(w.peers[r.Partition][r.Topic], r.Offset)
	ev, err := w.decode(r)
	if err == nil {
		err = checkRange(ev, w.cfg.MaxAbsValue)
	}
	if err != nil {
		w.stats.PeerRejected++ // its own partition dead-letters it
		return nil
	}
	w.ev = ev
	res, err := w.model.Peer(keyed.Input{Key: string(r.Key), Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Event: &w.ev})
	switch {
	case err != nil:
		return err // the key store failed: the partition restores
	case res == keyed.PeerFailed:
		w.stats.PeerRejected++
	case res == keyed.PeerSkipped:
		w.stats.Skipped++
	case res == keyed.PeerLearned:
		w.stats.PeerLearned++
	}
	return nil
}

// Peers is the next offset to read of each other partition's input topics,
// indexed by partition (0 for one not read yet), nil without a shared part
// across partitions or before the first such record.
func (w *Worker) Peers() [][2]int64 {
	if len(w.peers) == 0 {
		return nil
	}
	next := make([][2]int64, len(w.peers))
	for p, t := range w.peers {
		next[p] = [2]int64{t[0] + 1, t[1] + 1} // NoOffset + 1 = 0
	}
	return next
}

// marker is the marker that closes a checkpoint of everything processed,
// written under epoch.
func (w *Worker) marker(epoch checkpoint.Epoch) checkpoint.Marker {
	return checkpoint.Marker{Partition: w.partition, Epoch: epoch, Through: w.through, Reread: w.rereadCount(), Peers: slices.Clone(w.peers), Digest: w.digest}
}

// restorePeers sets where the other partitions' reading resumes after a
// restore from snap: at the cut its marker closed. When the shared part's
// record could not be read, it is rebuilt from further back (its earlier
// record, or nothing) and every other partition is read again from its
// start, of which it skips what that record absorbed.
func (w *Worker) restorePeers(snap *checkpoint.Snapshot) {
	w.peers = nil
	if !w.cfg.SharedAcrossPartitions || snap.Marker == nil {
		return
	}
	for _, c := range snap.Corrupt {
		if c.Key == keyed.PopulationKey || c.Key == "" {
			return
		}
	}
	w.peers = slices.Clone(snap.Marker.Peers)
}
