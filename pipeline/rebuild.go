package pipeline

import (
	"errors"
	"fmt"
)

// A key whose latest record in the changelog cannot be used — unreadable,
// or written by a former owner after a newer one claimed the partition (a
// zombie's, left alone when the cleaner removed the accepted record it
// superseded) — replays from further back than the checkpoint the rest of
// the partition restores from: exact for keys that are independent (the
// key skips what it applied and absorbs the rest), not with a population
// model, where every key learns through a part shared by the partition,
// which is restored at the checkpoint: the key's replay would learn beside
// a shared part that is ahead of it. Such a restore is inexact, and is never
// used: the partition is rebuilt from its input topics' first records
// instead (Origin FromInputs), which is exact as long as they hold every
// record from offset 0; a source opened for a rebuild reports records that
// retention deleted as a permanent error (From.Strict), so the partition
// fails loudly rather than start from part of its history.

// ErrInexactRestore reports a changelog that cannot restore a partition
// exactly: with a population model, some key's latest record cannot be
// used (unreadable, or a zombie's left alone by compaction).
var ErrInexactRestore = errors.New("the changelog cannot restore the partition exactly")

// ErrDigestMismatch reports a restore whose state's digest is not its last
// marker's: a record missing, one too many, or another one than the
// writer's.
var ErrDigestMismatch = errors.New("the restored state's digest is not its checkpoint's")

// inexactError is an inexact restore: what it read, for the claim that
// follows and the warnings; mismatch, when set, holds the marker's digest
// and the loaded state's.
type inexactError struct {
	res       Restored
	partition int
	mismatch  *[2]uint64
}

func (e *inexactError) Error() string {
	if m := e.mismatch; m != nil {
		return fmt.Sprintf("partition %d: %v: %v: the state loaded has digest %016x, its last checkpoint (through offset %d) %016x: a record is missing, one too many, or another one than its writer's",
			e.partition, ErrInexactRestore, ErrDigestMismatch, m[1], e.res.Marker.Through[0], m[0])
	}
	return fmt.Sprintf("partition %d: %v: with a population model every key learns through the partition's shared part, and %d of its key records cannot be used (first: %v), so those keys would replay beside a shared part ahead of them",
		e.partition, ErrInexactRestore, len(e.res.Problems), e.first())
}

func (e *inexactError) Unwrap() []error {
	if e.mismatch != nil {
		return []error{ErrInexactRestore, ErrDigestMismatch}
	}
	return []error{ErrInexactRestore}
}

func (e *inexactError) first() error {
	if len(e.res.Problems) == 0 {
		return nil
	}
	return e.res.Problems[0]
}

// ErrInputGone reports input records deleted (retention) before a rebuild
// read them: the partition's state cannot be rebuilt exactly.
var ErrInputGone = errors.New("the input topic no longer holds the records a rebuild needs")
