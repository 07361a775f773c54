package service

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// Output batching. The Runner hands the sink a flush interval's outputs in
// one call and waits for it (on its write-behind goroutine, not the
// partition loop), so each call sends at once: one produce request per
// output partition and up to outputBatchBytes of records, the partitions in
// parallel.
const (
	// outputBatchBytes is the most record bytes one produce request
	// carries: the broker's default message.max.bytes (1 MiB) less room
	// for the batch's framing.
	outputBatchBytes = 1<<20 - 16<<10
	// outputWriteTimeout bounds one produce request, as kafka-go's Writer
	// bounds its own (WriteTimeout).
	outputWriteTimeout = 10 * time.Second
	// recordOverhead is a record's framing beside its key, value and
	// headers, at most (lengths, offset and time deltas as varints).
	recordOverhead = 32
)

// OutputProducer writes records to the partitions of one topic, keyed as
// kafka-go's Hash balancer keys them (the partition Sarama and the Java
// client's default partitioner pick), with acks = all. It sends each call's
// records at once through kafka.Client.Produce, one request per partition:
// kafka-go's Writer asks its transport for the topic's metadata once per
// message, makes room for BatchSize messages per batch, and has no flush,
// which together cost the service about a microsecond of CPU per output
// (BenchmarkOutputProducer). The throughput benchmark's pass-through
// baseline writes with it too.
type OutputProducer struct {
	client   *kafka.Client
	topic    string
	balancer kafka.Hash
	parts    []int // 0..n-1 for the last partition count seen
	mu       sync.Mutex
}

// NewOutputProducer returns a producer for topic on brokers over transport
// (nil: a transport of its own, never kafka-go's shared DefaultTransport,
// whose metadata cache may predate the topics the service just created).
func NewOutputProducer(brokers []string, topic string, transport *kafka.Transport) *OutputProducer {
	if transport == nil {
		transport = &kafka.Transport{}
	}
	return &OutputProducer{client: &kafka.Client{Addr: kafka.TCP(brokers...), Transport: transport}, topic: topic}
}

// Topic is the topic the producer writes.
func (p *OutputProducer) Topic() string { return p.topic }

// Write produces msgs, each partition's in the order given, and returns
// once every one is acknowledged, or with the first partition's error
// (errors are per partition: the records of the other partitions may have
// been written, and the caller writes the whole call again).
func (p *OutputProducer) Write(ctx context.Context, msgs []kafka.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	parts, err := p.partitions(ctx)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if size := recordSize(m); size > outputBatchBytes {
			return fmt.Errorf("record of %d bytes for topic %s is over the %d a produce request carries: %w", size, p.topic, outputBatchBytes, kafka.MessageSizeTooLarge)
		}
	}
	byPart := grouped(msgs, func(m kafka.Message) int { return p.balancer.Balance(m, parts...) })
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, ms := range byPart {
		wg.Go(func() { errs[i] = p.produce(ctx, i, ms) })
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
	return nil
}

// produce sends one partition's records in requests of at most
// outputBatchBytes, in order, stopping at the first failure.
func (p *OutputProducer) produce(ctx context.Context, partition int, msgs []kafka.Message) error {
	for len(msgs) > 0 {
		n, size := 0, 0
		for ; n < len(msgs); n++ { // Write checked that every record fits alone
			if size += recordSize(msgs[n]); size > outputBatchBytes {
				break
			}
		}
		rctx, cancel := context.WithTimeout(ctx, outputWriteTimeout)
		res, err := p.client.Produce(rctx, &kafka.ProduceRequest{Topic: p.topic, Partition: partition,
			RequiredAcks: kafka.RequireAll, Records: &messageRecords{msgs: msgs[:n]}})
		cancel()
		switch {
		case err != nil:
		case res.Error != nil:
			err = res.Error
		case len(res.RecordErrors) > 0:
			i := slices.Min(slices.Collect(maps.Keys(res.RecordErrors)))
			err = fmt.Errorf("%d records refused, first record %d: %w", len(res.RecordErrors), i, res.RecordErrors[i])
		}
		if err != nil {
			return fmt.Errorf("partition %d: %w", partition, err)
		}
		msgs = msgs[n:]
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

// recordSize bounds a record's bytes in a produce request.
func recordSize(m kafka.Message) int {
	n := len(m.Key) + len(m.Value) + recordOverhead
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value) + 8
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
