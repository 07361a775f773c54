package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
)

// Output batching. The Runner hands the sink a flush interval's outputs in
// one call and waits for it (on its write-behind goroutine, not the
// partition loop), so each call sends at once: one produce request per
// output partition, each one record batch within the topic's limit, the
// partitions in parallel.
const (
	// outputWriteTimeout bounds one produce request, as kafka-go's Writer
	// bounds its own (WriteTimeout).
	outputWriteTimeout = 10 * time.Second
)

// ErrNotCoPartitioned reports an output topic with fewer partitions than
// the input partition an output belongs to.
var ErrNotCoPartitioned = errors.New("the topics are not co-partitioned")

// OutputProducer writes records to the partitions of one topic, keyed by
// topics.DefaultPartitioner (murmur2, the Java client's and cmd/producer's
// default: a key's outputs land in the partition number of its inputs when
// both topics have as many partitions), with acks = all. It sends each call's
// records at once through kafka.Client.Produce, one request per partition:
// kafka-go's Writer asks its transport for the topic's metadata once per
// message, makes room for BatchSize messages per batch, and has no flush,
// which together cost the service about a microsecond of CPU per output
// (BenchmarkOutputProducer). The throughput benchmark's pass-through
// baseline writes with it too.
type OutputProducer struct {
	client   *kafka.Client
	topic    string
	limit    int                   // the topic's max.message.bytes: the largest batch a request carries
	balancer kafka.Murmur2Balancer // topics.DefaultPartitioner
	parts    []int                 // 0..n-1 for the last partition count seen
	mu       sync.Mutex
	// byPartition writes each message to the partition its Partition field
	// names instead of by its key (SetByPartition).
	byPartition bool
}

// SetByPartition makes Write put each message on the partition its
// Partition field names, whatever its key: the service writes a record's
// outputs to its input's partition number (docs/CONTRACTS.md), so that
// they are co-partitioned with the input whichever partitioner its
// producer used (librdkafka's default, crc32, puts most keys elsewhere
// than murmur2). A message naming a partition the topic lacks fails the
// call.
func (p *OutputProducer) SetByPartition() { p.byPartition = true }

// NewOutputProducer returns a producer for topic on brokers over transport
// (nil: a transport of its own, never kafka-go's shared DefaultTransport,
// whose metadata cache may predate the topics the service just created).
// limit is the topic's max.message.bytes (≤ 0: Kafka's default): no request
// carries a batch over it, and a record that cannot fit alone is refused
// without being sent (RefusedError).
func NewOutputProducer(brokers []string, topic string, transport *kafka.Transport, limit int) *OutputProducer {
	if transport == nil {
		transport = &kafka.Transport{}
	}
	if limit <= 0 {
		limit = pipeline.DefaultMaxMessageBytes
	}
	return &OutputProducer{client: &kafka.Client{Addr: kafka.TCP(brokers...), Transport: transport}, topic: topic, limit: limit}
}

// Topic is the topic the producer writes.
func (p *OutputProducer) Topic() string { return p.topic }

// Refusal is one record that the broker refused for itself (or that could
// not fit a request), not for its partition or the connection: sending it
// again cannot succeed.
type Refusal struct {
	Index int   // into the call's records
	Err   error // kafka.MessageSizeTooLarge, CorruptMessage, InvalidRecord…
}

// RefusedError reports that every record of a call was written except
// Refused, in index order.
type RefusedError struct {
	Topic   string
	Refused []Refusal
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%d records refused by topic %s, first record %d: %v", len(e.Refused), e.Topic, e.Refused[0].Index, e.Refused[0].Err)
}

// Unwrap exposes the first refusal's cause.
func (e *RefusedError) Unwrap() error { return e.Refused[0].Err }

// recordRefused reports whether err is the broker's verdict on a record
// itself: too large, corrupt, invalid, or with a bad timestamp.
func recordRefused(err error) bool {
	return errors.Is(err, kafka.MessageSizeTooLarge) || errors.Is(err, kafka.RecordListTooLarge) || errors.Is(err, kafka.InvalidMessage) ||
		errors.Is(err, kafka.InvalidRecord) || errors.Is(err, kafka.InvalidTimestamp)
}

// Write produces msgs, each partition's in the order given, and returns
// once every one is acknowledged. A record the broker refuses for itself
// (recordRefused) is left out and the others are written: the call then
// returns a *RefusedError naming it. Any other failure is per partition:
// the call returns the first partition's error, the records of the other
// partitions may have been written, and the caller writes the whole call
// again.
func (p *OutputProducer) Write(ctx context.Context, msgs []kafka.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	parts, err := p.partitions(ctx)
	if err != nil {
		return err
	}
	idx := make([]int, len(msgs))
	for i := range idx {
		idx[i] = i
	}
	place := func(i int) int { return p.balancer.Balance(msgs[i], parts...) }
	if p.byPartition {
		for _, m := range msgs {
			if m.Partition < 0 || m.Partition >= len(parts) {
				return fmt.Errorf("an output of input partition %d: topic %s has %d partitions: %w", m.Partition, p.topic, len(parts), ErrNotCoPartitioned)
			}
		}
		place = func(i int) int { return msgs[i].Partition }
	}
	byPart := grouped(idx, place)
	errs := make([]error, len(parts))
	refused := make([][]Refusal, len(parts))
	var wg sync.WaitGroup
	for part, is := range byPart {
		wg.Go(func() { refused[part], errs[part] = p.produce(ctx, part, msgs, is) })
	}
	wg.Wait()
	failed, first := 0, error(nil)
	for _, err := range errs {
		if err != nil {
			if failed++; first == nil {
				first = err
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d partitions of %s failed, first: %w", failed, len(byPart), p.topic, first)
	}
	var all []Refusal
	for _, r := range refused {
		all = append(all, r...)
	}
	if len(all) > 0 {
		slices.SortFunc(all, func(a, b Refusal) int { return a.Index - b.Index })
		return &RefusedError{Topic: p.topic, Refused: all}
	}
	return nil
}

// produce sends one partition's records (msgs at indexes is), in order, in
// requests of at most one batch within the topic's limit, stopping at the
// first failure. A record too large for any batch is refused without being
// sent; a request the broker refuses for a record (recordRefused) is sent
// again one record a request, and the records refused alone are returned.
func (p *OutputProducer) produce(ctx context.Context, partition int, msgs []kafka.Message, is []int) ([]Refusal, error) {
	var refused []Refusal
	batch := make([]kafka.Message, 0, len(is))
	for len(is) > 0 {
		n, size := 0, pipeline.BatchOverhead
		for ; n < len(is); n++ {
			rs := recordSize(msgs[is[n]])
			if pipeline.BatchOverhead+rs > p.limit {
				break // refused below, alone
			}
			if size += rs; size > p.limit {
				break
			}
		}
		if n == 0 { // the first record cannot fit any request
			refused = append(refused, Refusal{Index: is[0], Err: fmt.Errorf("record of %d bytes is over topic %s's limit of %d (max.message.bytes): %w",
				recordSize(msgs[is[0]]), p.topic, p.limit, kafka.MessageSizeTooLarge)})
			is = is[1:]
			continue
		}
		batch = batch[:0]
		for _, i := range is[:n] {
			batch = append(batch, msgs[i])
		}
		err := p.send(ctx, partition, batch)
		if err != nil && recordRefused(err) {
			if n > 1 {
				n = 1 // again one record a request, to find the one refused
				if err = p.send(ctx, partition, batch[:1]); err == nil || !recordRefused(err) {
					goto next
				}
			}
			refused = append(refused, Refusal{Index: is[0], Err: err})
			err = nil
		}
	next:
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", partition, err)
		}
		is = is[n:]
	}
	return refused, nil
}

// send produces one record batch to partition and waits for all in-sync
// replicas.
func (p *OutputProducer) send(ctx context.Context, partition int, batch []kafka.Message) error {
	rctx, cancel := context.WithTimeout(ctx, outputWriteTimeout)
	defer cancel()
	res, err := p.client.Produce(rctx, &kafka.ProduceRequest{Topic: p.topic, Partition: partition,
		RequiredAcks: kafka.RequireAll, Records: &messageRecords{msgs: batch}})
	switch {
	case err != nil:
		return err
	case res.Error != nil:
		return res.Error
	case len(res.RecordErrors) > 0:
		i := slices.Min(slices.Collect(maps.Keys(res.RecordErrors)))
		return fmt.Errorf("%d records refused, first record %d: %w", len(res.RecordErrors), i, res.RecordErrors[i])
	}
	return nil
}

// partitions returns 0..n-1 for the topic's partition count n, from the
// transport's metadata cache (refreshed by kafka-go every 6 s).
func (p *OutputProducer) partitions(ctx context.Context) ([]int, error) {
	meta, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{p.topic}})
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", p.topic, err)
	}
	n := -1
	for _, t := range meta.Topics {
		if t.Name == p.topic {
			if t.Error != nil {
				return nil, fmt.Errorf("metadata of %s: %w", p.topic, t.Error)
			}
			n = len(t.Partitions)
		}
	}
	if n <= 0 {
		return nil, fmt.Errorf("metadata of %s: no partitions: %w", p.topic, kafka.UnknownTopicOrPartition)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.parts) != n {
		parts := make([]int, n)
		for i := range parts {
			parts[i] = i
		}
		p.parts = parts // callers may hold the old slice: it is never written again
	}
	return p.parts, nil
}

// grouped splits items by key, keeping their order within each group; each
// group is allocated once, at its size (appending ~150-byte kafka.Messages
// one by one showed up in the throughput benchmark's CPU profile).
func grouped[K comparable, T any](items []T, key func(T) K) map[K][]T {
	keys, counts := make([]K, len(items)), map[K]int{}
	for i, it := range items {
		keys[i] = key(it)
		counts[keys[i]]++
	}
	out := make(map[K][]T, len(counts))
	for k, n := range counts {
		out[k] = make([]T, 0, n)
	}
	for i, it := range items {
		out[keys[i]] = append(out[keys[i]], it)
	}
	return out
}

// recordSize bounds a record's bytes in a batch (pipeline.RecordBytes).
func recordSize(m kafka.Message) int {
	n := len(m.Key) + len(m.Value) + pipeline.RecordOverhead
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value) + pipeline.HeaderOverhead
	}
	return n
}

// messageRecords is a kafka.RecordReader over messages that reuses one
// record and two readers, so that encoding a request allocates nothing per
// record. The encoder reads each record before it asks for the next.
type messageRecords struct {
	msgs       []kafka.Message
	rec        kafka.Record
	key, value payload
}

func (r *messageRecords) ReadRecord() (*kafka.Record, error) {
	if len(r.msgs) == 0 {
		return nil, io.EOF
	}
	m := &r.msgs[0]
	r.msgs = r.msgs[1:]
	r.rec = kafka.Record{Time: m.Time, Headers: m.Headers}
	if m.Key != nil {
		r.key.Reset(m.Key)
		r.rec.Key = &r.key
	}
	if m.Value != nil {
		r.value.Reset(m.Value)
		r.rec.Value = &r.value
	}
	return &r.rec, nil
}

// payload is a record's key or value as kafka.Bytes.
type payload struct{ bytes.Reader }

func (*payload) Close() error { return nil }

var _ kafka.RecordReader = (*messageRecords)(nil)
