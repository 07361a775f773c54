package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/segmentio/kafka-go"
)

// maxBatchBytes keeps one produce request under the broker's default limit.
const maxBatchBytes = 512 << 10

// A v2 record batch's header, and the most one record's framing adds to
// its key and value besides its headers (length, attributes, timestamp and
// offset deltas, key and value lengths, header count, as varints at their
// widest): what a broker counts against max.message.bytes.
const (
	BatchOverhead  = 61
	RecordOverhead = 41
)

// KafkaStore keeps checkpoints in a compacted changelog topic partitioned
// like the events topic: the record key is the entity key (so compaction
// keeps the latest state per key, and a corrupt value still names its key),
// each checkpoint ends with a marker record, and each owner's claim is an
// ownership record under its own key. Writes wait for all in-sync replicas
// (acks = all) and go over one cached connection per partition leader, dropped
// and redialed after any error; the caller retries (pipeline.Runner does,
// with backoff).
type KafkaStore struct {
	dialer  *kafka.Dialer
	brokers []string
	topic   string

	// Verify, when set, is called before every connection to a partition's
	// leader (a first write, a reconnect after an error, a load): it fails
	// when the topic is missing or not as the caller checked it at start.
	// kafka-go looks a leader up with a metadata request, which a broker
	// with auto.create.topics.enable answers by creating a missing topic:
	// without the check, a deleted changelog comes back, empty and with the
	// broker's default policy, on the next write.
	Verify func(ctx context.Context) error

	// batchLimit bounds one produce request's records (maxBatchBytes, or
	// less for a topic whose max.message.bytes is lower: SetBatchLimit).
	batchLimit int

	mu    sync.Mutex
	conns map[int]*partitionConn
}

// SetBatchLimit keeps every produce request within the topic's
// max.message.bytes (a record batch's framing aside); call it before use.
// A single record larger than that is still sent, alone, and refused by the
// broker: the pipeline's key-record bound keeps them below it.
func (s *KafkaStore) SetBatchLimit(maxMessageBytes int) {
	if maxMessageBytes > 0 {
		s.batchLimit = min(maxBatchBytes, maxMessageBytes-BatchOverhead)
	}
}

// partitionConn is the cached leader connection of one partition; its mutex
// serializes the writes on it.
type partitionConn struct {
	mu   sync.Mutex
	conn *kafka.Conn
}

// NewKafkaStore returns a store on topic, dialing brokers with dialer (which
// carries TLS and SASL settings).
func NewKafkaStore(dialer *kafka.Dialer, brokers []string, topic string) (*KafkaStore, error) {
	if len(brokers) == 0 || topic == "" {
		return nil, errors.New("kafka checkpoint store: brokers and topic are required")
	}
	if dialer == nil {
		dialer = &kafka.Dialer{Timeout: 10 * time.Second}
	}
	return &KafkaStore{dialer: dialer, brokers: brokers, topic: topic, batchLimit: maxBatchBytes, conns: map[int]*partitionConn{}}, nil
}

// leader connects to the leader of partition p.
func (s *KafkaStore) leader(ctx context.Context, p int) (*kafka.Conn, error) {
	if s.Verify != nil {
		if err := s.Verify(ctx); err != nil {
			return nil, err
		}
	}
	var errs []error
	for _, b := range s.brokers {
		c, err := s.dialer.DialLeader(ctx, "tcp", b, s.topic, p)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("changelog %s partition %d: %w", s.topic, p, errors.Join(errs...))
}

// produce writes msgs to partition p over the cached connection, in batches
// under maxBatchBytes, and returns the offsets of the first record and after
// the last one; any error drops the connection.
func (s *KafkaStore) produce(ctx context.Context, p int, msgs []kafka.Message) (first, end int64, err error) {
	s.mu.Lock()
	pc := s.conns[p]
	if pc == nil {
		pc = &partitionConn{}
		s.conns[p] = pc
	}
	s.mu.Unlock()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.conn == nil {
		c, err := s.leader(ctx, p)
		if err != nil {
			return 0, 0, err
		}
		if err := c.SetRequiredAcks(-1); err != nil {
			c.Close()
			return 0, 0, fmt.Errorf("changelog %s partition %d: acks=all: %w", s.topic, p, err)
		}
		pc.conn = c
	}
	var last int64
	deadline := time.Now().Add(30 * time.Second)
	if dl, ok := ctx.Deadline(); ok {
		deadline = dl
	}
	pc.conn.SetWriteDeadline(deadline)
	pc.conn.SetReadDeadline(deadline) // the produce response
	for start := 0; start < len(msgs); {
		end, size := start, 0
		for end < len(msgs) {
			n := len(msgs[end].Key) + len(msgs[end].Value) + RecordOverhead
			if end > start && size+n > s.batchLimit {
				break
			}
			size += n
			end++
		}
		_, _, base, _, err := pc.conn.WriteCompressedMessagesAt(nil, msgs[start:end]...)
		if err != nil {
			pc.conn.Close()
			pc.conn = nil
			return 0, 0, fmt.Errorf("changelog %s partition %d: %w", s.topic, p, err)
		}
		if start == 0 {
			first = base
		}
		start, last = end, base+int64(end-start)
	}
	return first, last, nil
}

// Claim produces an ownership record to partition o.Partition.
func (s *KafkaStore) Claim(ctx context.Context, o Ownership) error {
	_, err := s.ClaimAt(ctx, o)
	return err
}

// ClaimAt is Claim, returning the ownership record's offset in the changelog.
func (s *KafkaStore) ClaimAt(ctx context.Context, o Ownership) (int64, error) {
	at, _, err := s.produce(ctx, o.Partition, []kafka.Message{{Key: []byte(ownerKey(o.Epoch)), Value: EncodeOwnership(o)}})
	return at, err
}

// Write produces the key records, then the marker, to partition m.Partition.
func (s *KafkaStore) Write(ctx context.Context, keys []KeyRecord, m Marker) error {
	_, err := s.WriteAt(ctx, keys, m)
	return err
}

// WriteAt is Write, returning the changelog offset after the marker.
func (s *KafkaStore) WriteAt(ctx context.Context, keys []KeyRecord, m Marker) (int64, error) {
	msgs := make([]kafka.Message, 0, len(keys)+1)
	_, err := encodeCheckpoint(keys, m, func(b []byte, key string, rec []byte) []byte {
		msgs = append(msgs, kafka.Message{Key: []byte(key), Value: rec})
		return b
	})
	if err != nil {
		return 0, err
	}
	_, end, err := s.produce(ctx, m.Partition, msgs)
	return end, err
}

// Load reads partition p of the changelog from its first to its last offset.
func (s *KafkaStore) Load(ctx context.Context, p int, sink KeySink) (Snapshot, error) {
	return s.LoadUntil(ctx, p, -1, sink)
}

// LoadUntil is Load reading the offsets before to only (to < 0: up to the
// partition's last offset, as Load does).
func (s *KafkaStore) LoadUntil(ctx context.Context, p int, to int64, sink KeySink) (Snapshot, error) {
	snap := newSnapshot(sink)
	conn, err := s.leader(ctx, p)
	if err != nil {
		return snap, err
	}
	defer conn.Close()
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return snap, fmt.Errorf("changelog %s partition %d: offsets: %w", s.topic, p, err)
	}
	switch {
	case to > last:
		return snap, fmt.Errorf("changelog %s partition %d: load until offset %d, after its end (%d)", s.topic, p, to, last)
	case to >= 0:
		last = to
	}
	first = min(first, last)
	snap.reserve(int(last - first)) // a compacted changelog holds about one record per key
	// The records are absorbed on this goroutine while the next ones are
	// read on another: reading (kafka-go parsing the fetch responses) and
	// absorbing (CRC, decode, fencing, the key map) overlap on two CPUs
	// (BenchmarkRestore). This goroutine drains every chunk, so the reader
	// never waits on a receiver that has gone.
	chunks := make(chan []kafka.Message, 4)
	var rerr error
	go func() {
		defer close(chunks)
		var chunk []kafka.Message
		rerr = kafkaread.Range(ctx, conn, first, last, func(msg kafka.Message) error {
			if chunk == nil {
				chunk = make([]kafka.Message, 0, loadChunk)
			}
			if chunk = append(chunk, msg); len(chunk) == loadChunk {
				chunks <- chunk
				chunk = nil
			}
			return nil
		})
		if len(chunk) > 0 {
			chunks <- chunk
		}
	}()
	for chunk := range chunks {
		for _, msg := range chunk {
			if msg.Value != nil { // a tombstone carries nothing
				snap.absorb(p, msg.Offset, msg.Key, msg.Value, true) // kafka-go reads every message into buffers of its own
			}
		}
	}
	if err := rerr; err != nil {
		return snap, fmt.Errorf("changelog %s partition %d: %w", s.topic, p, err)
	}
	snap.End = last
	snap.end()
	return snap, nil
}

// LoadRange absorbs the records at offsets [from, to) of partition p of the
// changelog into snap, a snapshot from Resume: the tail that other owners
// wrote after the state the caller holds. Compaction may have removed some
// of them, but only in favour of later records of the same key, which are
// in the range too. It fails with ErrTailGone when the partition's first
// retained offset is past from.
func (s *KafkaStore) LoadRange(ctx context.Context, p int, from, to int64, snap *Snapshot) error {
	if err := checkRange(from, to, snap); err != nil {
		return err
	}
	if from == to {
		return nil
	}
	conn, err := s.leader(ctx, p)
	if err != nil {
		return err
	}
	defer conn.Close()
	first, last, err := conn.ReadOffsets()
	switch {
	case err != nil:
		return fmt.Errorf("changelog %s partition %d: offsets: %w", s.topic, p, err)
	case first > from:
		return fmt.Errorf("changelog %s partition %d starts at %d, after %d: %w", s.topic, p, first, from, ErrTailGone)
	case to > last:
		return fmt.Errorf("changelog %s partition %d: the range [%d, %d) ends after the log (%d)", s.topic, p, from, to, last)
	}
	err = kafkaread.Range(ctx, conn, from, to, func(msg kafka.Message) error {
		if msg.Value != nil {
			snap.absorb(p, msg.Offset, msg.Key, msg.Value, true)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("changelog %s partition %d: %w", s.topic, p, err)
	}
	snap.end()
	return nil
}

// loadChunk is how many records Load's reader hands over at once.
const loadChunk = 1024

// Close closes the cached connections.
func (s *KafkaStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pc := range s.conns {
		pc.mu.Lock()
		if pc.conn != nil {
			pc.conn.Close()
			pc.conn = nil
		}
		pc.mu.Unlock()
	}
	return nil
}
