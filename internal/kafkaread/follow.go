package kafkaread

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	fetchapi "github.com/segmentio/kafka-go/protocol/fetch"
)

// FollowConfig configures Follow.
type FollowConfig struct {
	// Topic and Partition name the partition read.
	Topic     string
	Partition int
	// From is the first offset to read.
	From int64
	// End, when positive, is the offset to stop before (a range); otherwise
	// Follow reads what arrives until ctx ends.
	End int64
	// Isolation is what Follow hands over of transactional records
	// (default ReadCommitted).
	Isolation Isolation
	// MaxWait bounds how long the broker holds a fetch that has nothing to
	// return (default 50 ms): the longest a new record waits to be read.
	MaxWait time.Duration
	// MaxBatch bounds the records handed to fn at once (default 512).
	MaxBatch int
	// MaxBytes bounds a fetch response (default 16 MiB); a broker returns a
	// first record batch larger than it whole (KIP-74).
	MaxBytes int
	// Deleted, when set, is told when records from From on were deleted
	// (retention) before they could be read: reading starts at first, or,
	// when it returns an error, stops with that error.
	Deleted func(from, first int64) error
	// Idle, when set, is told after each fetch that handed over no record:
	// the next offset to read and the partition's end (as fn's). A merge of
	// two partitions learns from it that one has nothing to wait for.
	Idle func(next, end int64) error
}

// fetchTimeout bounds one fetch beyond the time the broker may hold it.
const fetchTimeout = 30 * time.Second

// Follow reads a partition from cfg.From on, handing fn each fetch's
// records in order, in batches of at most cfg.MaxBatch, with the offset the
// partition's lag is measured to: the high watermark, or with ReadCommitted
// the last stable offset (records past an open transaction are not
// readable yet). That end is lowered by records skipped at the tail of a
// fetch (control records, aborted transactions), so a partition read to
// its end shows no lag.
//
// Fetches go through rt (a kafka.Transport with the service's TLS and SASL)
// to the partition's leader in the cluster at addr, as kafka-go's protocol
// package encodes them: kafka-go's Conn and Reader drop the fetch
// response's aborted-transaction list and hand over the records of aborted
// transactions even at ReadCommitted (segmentio/kafka-go issue 1332), so
// Follow reads the response's record batches itself and filters them
// (abortFilter). It returns nil at cfg.End, ctx's error when ctx ends, and
// otherwise the first error of a fetch or of fn; the caller decides whether
// to read again. fn owns the batch it is given.
func Follow(ctx context.Context, rt kafka.RoundTripper, addr net.Addr, cfg FollowConfig, fn func(batch []kafka.Message, end int64) error) error {
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 50 * time.Millisecond
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 16 << 20
	}
	f := &follower{rt: rt, addr: addr, cfg: cfg, next: cfg.From}
	for cfg.End <= 0 || f.next < cfg.End {
		if err := ctx.Err(); err != nil {
			return err
		}
		batches, end, err := f.fetch(ctx)
		if err != nil {
			return orCtx(ctx, err)
		}
		if len(batches) == 0 && cfg.Idle != nil {
			if err := cfg.Idle(f.next, end); err != nil {
				return err
			}
		}
		for _, b := range batches {
			if err := fn(b, end); err != nil {
				return err
			}
		}
	}
	return nil
}

// follower is one Follow's position and connection.
type follower struct {
	rt   kafka.RoundTripper
	addr net.Addr
	cfg  FollowConfig
	next int64
}

// fetch sends one fetch at f.next and returns the records it hands over,
// in batches of at most MaxBatch, none empty, moving f.next past every
// offset the response held (skipped ones too).
func (f *follower) fetch(ctx context.Context) ([][]kafka.Message, int64, error) {
	part, err := f.fetchAt(ctx, f.next, f.cfg.MaxBytes)
	if err != nil {
		return nil, 0, err
	}
	if part.ErrorCode != 0 {
		kerr := kafka.Error(part.ErrorCode)
		if !errors.Is(kerr, kafka.OffsetOutOfRange) {
			return nil, 0, fmt.Errorf("read %s/%d at offset %d: %w", f.cfg.Topic, f.cfg.Partition, f.next, kerr)
		}
		// Apache Kafka answers an offset out of range with log start −1
		// (the in-process broker gives it): ask for it.
		start := part.LogStartOffset
		if start <= f.next {
			if start, err = f.logStart(ctx); err != nil {
				return nil, 0, err
			}
		}
		if start <= f.next { // past the end, not before the start
			return nil, 0, fmt.Errorf("read %s/%d at offset %d (log start %d): %w", f.cfg.Topic, f.cfg.Partition, f.next, start, kerr)
		}
		if f.cfg.Deleted != nil { // deleted (retention) before we read it
			if err := f.cfg.Deleted(f.next, start); err != nil {
				return nil, 0, err
			}
		}
		f.next = start
		return f.fetch(ctx) // from there
	}
	end := part.HighWatermark
	var filter *abortFilter
	if f.cfg.Isolation == ReadCommitted {
		if part.LastStableOffset >= 0 {
			end = part.LastStableOffset
		}
		aborted := make([]AbortedTxn, len(part.AbortedTransactions))
		for i, a := range part.AbortedTransactions {
			aborted[i] = AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
		}
		filter = newAbortFilter(aborted)
	}
	before := f.next
	batches, last, err := f.records(part.RecordSet.Records, filter)
	if err == nil && f.next == before && last >= 0 && before < end {
		// The response held only a batch that compaction emptied from
		// before on (its last records removed; the rest of the partition in
		// the next segment, which a fetch does not reach into): kafka-go's
		// protocol package drops a batch's last offset, so find it.
		f.next, err = f.pastBatch(ctx, last, before, end)
	}
	if len(batches) > 0 && f.next >= end {
		// Everything after the last record handed over was skipped.
		last := batches[len(batches)-1]
		end -= f.next - (last[len(last)-1].Offset + 1)
	}
	return batches, end, err
}

// fetchAt sends one fetch at offset, for at most maxBytes of the partition
// (a broker returns at least one whole batch), and returns the partition's
// part of the response.
func (f *follower) fetchAt(ctx context.Context, offset int64, maxBytes int) (*fetchapi.ResponsePartition, error) {
	rctx, cancel := context.WithTimeout(ctx, f.cfg.MaxWait+fetchTimeout)
	defer cancel()
	m, err := f.rt.RoundTrip(rctx, f.addr, &fetchapi.Request{
		ReplicaID:      -1,
		MaxWaitTime:    int32(f.cfg.MaxWait / time.Millisecond),
		MinBytes:       1,
		MaxBytes:       int32(maxBytes),
		IsolationLevel: f.cfg.Isolation.level(),
		SessionID:      0, // no fetch session: a full fetch each time
		SessionEpoch:   -1,
		Topics: []fetchapi.RequestTopic{{Topic: f.cfg.Topic, Partitions: []fetchapi.RequestPartition{{
			Partition: int32(f.cfg.Partition), CurrentLeaderEpoch: -1, FetchOffset: offset, LogStartOffset: -1,
			PartitionMaxBytes: int32(maxBytes)}}}},
	})
	if err != nil {
		return nil, transient(fmt.Errorf("fetch %s/%d at offset %d: %w", f.cfg.Topic, f.cfg.Partition, offset, err))
	}
	res := m.(*fetchapi.Response)
	if res.ErrorCode != 0 {
		return nil, fmt.Errorf("fetch %s/%d at offset %d: %w", f.cfg.Topic, f.cfg.Partition, offset, kafka.Error(res.ErrorCode))
	}
	for i := range res.Topics {
		for j := range res.Topics[i].Partitions {
			if p := &res.Topics[i].Partitions[j]; res.Topics[i].Topic == f.cfg.Topic && int(p.Partition) == f.cfg.Partition {
				return p, nil
			}
		}
	}
	return nil, transient(fmt.Errorf("fetch %s/%d: the response holds no such partition", f.cfg.Topic, f.cfg.Partition))
}

// logStart is the partition's first offset (kafka-go's ListOffsets,
// earliest).
func (f *follower) logStart(ctx context.Context) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	c := &kafka.Client{Addr: f.addr, Transport: f.rt}
	res, err := c.ListOffsets(rctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{f.cfg.Topic: {kafka.FirstOffsetOf(f.cfg.Partition)}}})
	if err != nil {
		return 0, transient(fmt.Errorf("list the first offset of %s/%d: %w", f.cfg.Topic, f.cfg.Partition, err))
	}
	for _, p := range res.Topics[f.cfg.Topic] {
		if p.Partition != f.cfg.Partition {
			continue
		}
		if p.Error != nil {
			return 0, fmt.Errorf("list the first offset of %s/%d: %w", f.cfg.Topic, f.cfg.Partition, p.Error)
		}
		return p.FirstOffset, nil
	}
	return 0, transient(fmt.Errorf("list the first offset of %s/%d: the response holds no such partition", f.cfg.Topic, f.cfg.Partition))
}

// firstBatch is the base offset of the first batch a fetch at offset
// returns, −1 when it returns none (offset at the partition's end). Its
// records are not read.
func (f *follower) firstBatch(ctx context.Context, offset int64) (int64, error) {
	part, err := f.fetchAt(ctx, offset, 1)
	if err != nil {
		return 0, err
	}
	if part.ErrorCode != 0 {
		if errors.Is(kafka.Error(part.ErrorCode), kafka.OffsetOutOfRange) {
			return -1, nil
		}
		return 0, fmt.Errorf("read %s/%d at offset %d: %w", f.cfg.Topic, f.cfg.Partition, offset, kafka.Error(part.ErrorCode))
	}
	batches := batchesOf(part.RecordSet.Records)
	defer drain(batches)
	if len(batches) == 0 {
		return -1, nil
	}
	return batchBase(batches[0]), nil
}

// pastBatch is the offset after the batch with base offset base, which
// holds offset from but no record at or after it (compaction removed
// them), found by fetching further offsets (each fetch returns the batch
// holding its offset, or the first one after): doubling steps while the
// batch is the same, then halving. A fetch at an offset in the same batch
// proves every offset up to it empty; one in another batch proves nothing,
// so the result is the batch's last offset + 1, which the Java client reads
// from the batch header (RecordBatch.nextOffset) and kafka-go does not give:
// a read there never skips a record. At most about 2·log₂(batch size)
// fetches, once per such batch (at most one per log segment).
func (f *follower) pastBatch(ctx context.Context, base, from, end int64) (int64, error) {
	same := func(offset int64) (bool, error) {
		if offset >= end {
			return false, nil
		}
		b, err := f.firstBatch(ctx, offset)
		return b == base, err
	}
	lo, hi := from, int64(-1) // lo in the batch; hi, once found, past it
	for step := int64(1); hi < 0; step *= 2 {
		ok, err := same(lo + step)
		if err != nil {
			return from, err
		}
		if ok {
			lo += step
		} else {
			hi = lo + step
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := same(mid)
		if err != nil {
			return from, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo + 1, nil
}

// batchesOf is a fetch's record batches.
func batchesOf(rr protocol.RecordReader) []protocol.RecordReader {
	if rr == nil {
		return nil
	}
	if s, ok := rr.(*protocol.RecordStream); ok {
		return s.Records
	}
	return []protocol.RecordReader{rr}
}

// batchBase is a batch's base offset (−1 for a kind without one).
func batchBase(b protocol.RecordReader) int64 {
	switch b := b.(type) {
	case *protocol.RecordBatch:
		return b.BaseOffset
	case *protocol.ControlBatch:
		return b.BaseOffset
	}
	return -1
}

// drain closes every record of batches unread, returning their buffers.
func drain(batches []protocol.RecordReader) {
	for _, b := range batches {
		for {
			r, err := b.ReadRecord()
			if err != nil {
				break
			}
			closeRecord(r)
		}
	}
}

// records reads a fetch's record batches from f.next on (a batch may start
// before it), moving f.next past each record, handed over or skipped, and
// returns the records handed over in slices of at most MaxBatch, each
// allocated once at that size: a fetch of up to MaxBytes holds tens of
// thousands of records, and one slice grown to hold them was a seventh of
// the service's CPU with late labels (BenchmarkRealKafkaCPU's profile).
// last is the base offset of the response's last batch (−1: none), which
// fetch needs when no record reached f.next: the batch a compaction
// emptied from f.next on.
func (f *follower) records(rr protocol.RecordReader, filter *abortFilter) (out [][]kafka.Message, last int64, err error) {
	batches := batchesOf(rr)
	var cur []kafka.Message
	add := func(m kafka.Message) {
		if len(cur) == cap(cur) {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = make([]kafka.Message, 0, f.cfg.MaxBatch)
		}
		cur = append(cur, m)
	}
	defer func() {
		if len(cur) > 0 {
			out = append(out, cur)
		}
	}()
	last = -1
	if len(batches) > 0 {
		last = batchBase(batches[len(batches)-1])
	}
	for _, b := range batches {
		keep := true
		switch b := b.(type) {
		case *protocol.ControlBatch:
			for {
				r, err := b.ReadRecord()
				if err != nil {
					break
				}
				if r.Offset >= f.next && (f.cfg.End <= 0 || r.Offset < f.cfg.End) {
					f.next = r.Offset + 1
				}
				if filter != nil {
					filter.control(b.BaseOffset, b.ProducerID, controlType(r) == 0)
				}
				closeRecord(r) // as every data record is: its buffers go back to kafka-go's pool
			}
			continue
		case *protocol.RecordBatch:
			if filter != nil {
				keep = filter.keep(b.BaseOffset, b.ProducerID, b.Attributes.Transactional())
			}
		}
		for {
			r, err := b.ReadRecord()
			if err != nil {
				break // the batch's end, or a batch cut short at the response's end: fetched again from f.next
			}
			if r.Offset < f.next {
				closeRecord(r)
				continue
			}
			if f.cfg.End > 0 && r.Offset >= f.cfg.End { // past a gap (compaction) at the end of the range
				closeRecord(r)
				f.next = f.cfg.End
				return out, last, nil
			}
			f.next = r.Offset + 1
			if !keep {
				closeRecord(r)
				continue
			}
			m, err := message(f.cfg.Topic, f.cfg.Partition, r)
			if err != nil {
				return out, last, fmt.Errorf("read %s/%d at offset %d: %w", f.cfg.Topic, f.cfg.Partition, r.Offset, err)
			}
			add(m)
		}
	}
	return out, last, nil
}

// message copies a record out of the response's buffers.
func message(topic string, partition int, r *protocol.Record) (kafka.Message, error) {
	defer closeRecord(r)
	key, err := protocol.ReadAll(r.Key)
	if err != nil {
		return kafka.Message{}, fmt.Errorf("key: %w", err)
	}
	value, err := protocol.ReadAll(r.Value)
	if err != nil {
		return kafka.Message{}, fmt.Errorf("value: %w", err)
	}
	return kafka.Message{Topic: topic, Partition: partition, Offset: r.Offset, Key: key, Value: value, Headers: r.Headers, Time: r.Time}, nil
}

func closeRecord(r *protocol.Record) {
	if r.Key != nil {
		r.Key.Close()
	}
	if r.Value != nil {
		r.Value.Close()
	}
}

// transientError is a fetch that failed on the way (connection, metadata,
// a leader being elected): reading again may succeed, as for kafka-go's
// temporary broker errors.
type transientError struct{ err error }

func (e transientError) Error() string   { return e.err.Error() }
func (e transientError) Unwrap() error   { return e.err }
func (e transientError) Temporary() bool { return true }

// transient marks err retriable unless it is a context's end or a broker
// error code, which say for themselves.
func transient(err error) error {
	var kerr kafka.Error
	if errors.Is(err, context.Canceled) || errors.As(err, &kerr) {
		return err
	}
	return transientError{err}
}

// StableOffset is topic/partition's last stable offset: the first offset of
// a transaction still open, else the high watermark (Kafka's ListOffsets
// for the latest offset at read_committed).
func StableOffset(ctx context.Context, rt kafka.RoundTripper, addr net.Addr, topic string, partition int) (int64, error) {
	c := &kafka.Client{Addr: addr, Transport: rt, Timeout: fetchTimeout}
	res, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{IsolationLevel: kafka.ReadCommitted,
		Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(partition)}}})
	if err != nil {
		return 0, fmt.Errorf("last stable offset of %s/%d: %w", topic, partition, err)
	}
	for _, p := range res.Topics[topic] {
		if p.Partition == partition {
			if p.Error != nil {
				return 0, fmt.Errorf("last stable offset of %s/%d: %w", topic, partition, p.Error)
			}
			return p.LastOffset, nil
		}
	}
	return 0, fmt.Errorf("last stable offset of %s/%d: not in the broker's answer", topic, partition)
}
