package pipeline

import (
	"context"

	"github.com/driftstream/driftstream/checkpoint"
)

// Source delivers one partition's input records.
type Source interface {
	// Records delivers records in batches (what one fetch returned, say), in
	// offset order per input topic: one channel operation per batch rather
	// than per record. It is closed when a bounded input (a file, a topic
	// range) is exhausted. A Fetched with Err set reports a failed read; it
	// ends its batch and nothing follows it.
	Records() <-chan []Fetched
	// Close stops the source and waits for its goroutines.
	Close() error
}

// Fetched is a record read by a Source, or its read error.
type Fetched struct {
	Record
	// HighWatermark is the partition's end offset when the record was read
	// (0 when unknown), for lag.
	HighWatermark int64
	Err           error
	// Idle marks a fetch that returned nothing: no record, only the input's
	// next offset (Record.Offset) and end (HighWatermark), for Merge; a
	// Source's Records never carries one.
	Idle bool
}

// Opener opens a partition's source at from.
type Opener func(ctx context.Context, from From) (Source, error)

// From is where a partition's source starts reading.
type From struct {
	// Topics is the next offset of each input topic (EventsTopic,
	// LabelsTopic) of the partition.
	Topics [2]int64
	// Peers is, with a shared part across partitions
	// (keyed.Settings.SharedAcrossPartitions), the next offset of each
	// other partition's input topics, indexed by partition then as
	// Topics; a partition not read yet starts at 0 (its first record).
	// Nil without one, or before the first record of another partition.
	Peers [][2]int64
	// Strict is set when the partition is rebuilt from its input topics'
	// first records (Origin FromInputs): a source must then fail with an
	// error wrapping ErrInputGone, not retriable, where retention deleted
	// any record of the partition's inputs from Topics on, instead of
	// going on from the first one kept.
	Strict bool
}

// Peer is the offset at which partition p's input topic starts.
func (f From) Peer(p, topic int) int64 {
	if p < len(f.Peers) {
		return f.Peers[p][topic]
	}
	return 0
}

// SourceInput is one log a partition's source reads: an input topic
// (EventsTopic or LabelsTopic) of a partition, from an offset.
type SourceInput struct {
	Topic, Partition int
	From             int64
}

// Inputs lists the logs a source of partition p opened at f reads, in the
// order Merge breaks timestamp ties in: p's events topic, its labels topic
// (with labels), then, for a shared part across partitions, each other
// partition of peers (ascending) the same way. The service and the topic
// backtest both read in this order, so that they merge alike.
func (f From) Inputs(p int, labels bool, peers []int) []SourceInput {
	var in []SourceInput
	add := func(q int, from [2]int64) {
		in = append(in, SourceInput{EventsTopic, q, from[EventsTopic]})
		if labels {
			in = append(in, SourceInput{LabelsTopic, q, from[LabelsTopic]})
		}
	}
	add(p, f.Topics)
	for _, q := range peers {
		if q != p {
			add(q, [2]int64{f.Peer(q, EventsTopic), f.Peer(q, LabelsTopic)})
		}
	}
	return in
}

// Sink writes outputs to where they are read (output topics, a report).
type Sink interface {
	// Write returns once every output is durable.
	Write(ctx context.Context, outs []Output) error
}

// Committer records the input offsets a partition has checkpointed through
// (a consumer group's committed offsets); outputs below them are not
// repeated after a restart.
type Committer interface {
	// Commit records next, the offset to read next per input topic (−1 for a
	// topic with nothing to commit).
	Commit(ctx context.Context, next [2]int64) error
}

// PositionedStore is a Store that reports where its records land in a
// partition's log (checkpoint.KafkaStore and MemoryStore do). With it, a
// partition that stays with its member across a rebalance keeps its
// in-memory state instead of restoring it.
type PositionedStore interface {
	checkpoint.Store
	// ClaimAt is Claim, returning the ownership record's position.
	ClaimAt(ctx context.Context, o checkpoint.Ownership) (int64, error)
	// WriteAt is Write, returning the position after the marker.
	WriteAt(ctx context.Context, keys []checkpoint.KeyRecord, m checkpoint.Marker) (int64, error)
	// LoadUntil is Load reading the positions before to only: the state
	// as of an ownership record at position to-1.
	LoadUntil(ctx context.Context, partition int, to int64, sink checkpoint.KeySink) (checkpoint.Snapshot, error)
	// LoadRange absorbs the records at positions [from, to) into snap, a
	// snapshot from checkpoint.Resume: a kept state catching up.
	LoadRange(ctx context.Context, partition int, from, to int64, snap *checkpoint.Snapshot) error
}
