package kafkaread

import (
	"cmp"
	"slices"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// Isolation is what a reader sees of transactional records, as the Java
// consumer's isolation.level. The zero value is ReadCommitted.
type Isolation int8

const (
	// ReadCommitted hands over only records of committed transactions and
	// records written without one, up to the last stable offset (the first
	// offset of a transaction still open): Kafka's read_committed. Control
	// records (transaction markers) are never handed over.
	ReadCommitted Isolation = iota
	// ReadUncommitted hands over every data record up to the high
	// watermark, those of aborted and open transactions too: Kafka's
	// read_uncommitted. Control records are never handed over.
	ReadUncommitted
)

// level is the isolation's value in a fetch request.
func (i Isolation) level() int8 {
	if i == ReadUncommitted {
		return int8(kafka.ReadUncommitted)
	}
	return int8(kafka.ReadCommitted)
}

// String is the isolation's name in Kafka's configuration.
func (i Isolation) String() string {
	if i == ReadUncommitted {
		return "read_uncommitted"
	}
	return "read_committed"
}

// ParseIsolation reads an isolation's name in Kafka's configuration.
func ParseIsolation(s string) (Isolation, bool) {
	switch s {
	case "read_committed":
		return ReadCommitted, true
	case "read_uncommitted":
		return ReadUncommitted, true
	}
	return 0, false
}

// AbortedTxn is one entry of a fetch response's aborted-transaction list:
// the producer whose transaction was aborted and the offset of its first
// record in the partition.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// abortFilter drops the records of aborted transactions from one fetch
// response, as the Java consumer's CompletedFetch does: kafka-go hands
// over every data batch of a fetch whatever the isolation level, and reads
// the response's aborted-transaction list without passing it on (its
// Conn.ReadBatch discards it, segmentio/kafka-go issue 1332), so the
// service reads fetch responses through kafka-go's protocol package and
// filters here.
//
// The broker lists, with each read_committed fetch, the aborted
// transactions that overlap the fetched range. Walking the batches in
// offset order, a producer becomes "aborting" when a batch at or past the
// first offset of one of its aborted transactions is reached, and stops
// being so at its ABORT marker (a control batch): a transactional data
// batch of an aborting producer is dropped, whatever else is delivered.
type abortFilter struct {
	pending  []AbortedTxn // not yet reached, by first offset
	aborting map[int64]struct{}
}

// newAbortFilter starts the filter of one fetch response's aborted
// transactions, which it sorts in place and keeps.
func newAbortFilter(aborted []AbortedTxn) *abortFilter {
	f := &abortFilter{pending: aborted}
	slices.SortFunc(f.pending, func(a, b AbortedTxn) int {
		return cmp.Or(cmp.Compare(a.FirstOffset, b.FirstOffset), cmp.Compare(a.ProducerID, b.ProducerID))
	})
	return f
}

// keep reports whether a data batch of producer pid starting at offset
// base is handed over (transactional: written inside a transaction).
func (f *abortFilter) keep(base, pid int64, transactional bool) bool {
	f.reach(base)
	if !transactional {
		return true
	}
	_, aborted := f.aborting[pid]
	return !aborted
}

// control takes a control batch of producer pid at offset base; abort says
// whether it holds an ABORT marker (control record type 0) rather than a
// COMMIT one.
func (f *abortFilter) control(base, pid int64, abort bool) {
	f.reach(base)
	if abort {
		delete(f.aborting, pid)
	}
}

// reach marks every producer whose aborted transaction starts at or before
// offset as aborting. A transaction starts at a batch's base offset, so a
// batch reaches its own transaction's entry.
func (f *abortFilter) reach(offset int64) {
	for len(f.pending) > 0 && f.pending[0].FirstOffset <= offset {
		if f.aborting == nil {
			f.aborting = map[int64]struct{}{}
		}
		f.aborting[f.pending[0].ProducerID] = struct{}{}
		f.pending = f.pending[1:]
	}
}

// controlType is the type of a control record: 0 ABORT, 1 COMMIT (its key:
// a version int16, then the type int16); -1 when the key is not one.
func controlType(r *protocol.Record) int {
	if r.Key == nil {
		return -1
	}
	k, err := protocol.ReadAll(r.Key)
	if err != nil || len(k) < 4 {
		return -1
	}
	return int(int16(uint16(k[2])<<8 | uint16(k[3])))
}
