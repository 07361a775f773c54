package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/segmentio/kafka-go"
)

// markerKey is the record key of partition markers in the changelog; entity
// keys never start with a NUL byte in practice, and a collision would only
// make the marker look corrupt (forcing a full, still exact, replay).
const markerKey = "\x00driftstream-marker"

// maxBatchBytes keeps one produce request under the broker's default limit.
const maxBatchBytes = 512 << 10

// KafkaStore keeps checkpoints in a compacted changelog topic partitioned
// like the events topic: the record key is the entity key (so compaction
// keeps the latest state per key, and a corrupt value still names its key),
// and each checkpoint ends with a marker record. Writes wait for all in-sync
// replicas (acks = all).
type KafkaStore struct {
	dialer  *kafka.Dialer
	brokers []string
	topic   string
}

// NewKafkaStore returns a store on topic, dialing brokers with dialer (which
// carries TLS and SASL settings).
func NewKafkaStore(dialer *kafka.Dialer, brokers []string, topic string) (*KafkaStore, error) {
	if len(brokers) == 0 || topic == "" {
		return nil, errors.New("kafka checkpoint store: brokers and topic are required")
	}
	return &KafkaStore{dialer: dialer, brokers: brokers, topic: topic}, nil
}

// leader connects to the leader of partition p.
func (s *KafkaStore) leader(ctx context.Context, p int) (*kafka.Conn, error) {
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

// Write produces the key records, then the marker, to partition m.Partition.
func (s *KafkaStore) Write(ctx context.Context, keys []KeyRecord, m Marker) error {
	msgs := make([]kafka.Message, 0, len(keys)+1)
	for _, k := range keys {
		if k.Partition != m.Partition {
			return fmt.Errorf("checkpoint partition %d: key %q belongs to partition %d", m.Partition, k.Key, k.Partition)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(k.Key), Value: EncodeKey(k)})
	}
	msgs = append(msgs, kafka.Message{Key: []byte(markerKey), Value: EncodeMarker(m)})
	conn, err := s.leader(ctx, m.Partition)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetRequiredAcks(-1); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetWriteDeadline(dl)
	} else {
		conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	}
	for start := 0; start < len(msgs); {
		end, size := start, 0
		for end < len(msgs) && (end == start || size+len(msgs[end].Value) < maxBatchBytes) {
			size += len(msgs[end].Key) + len(msgs[end].Value)
			end++
		}
		if _, err := conn.WriteMessages(msgs[start:end]...); err != nil {
			return fmt.Errorf("changelog %s partition %d: %w", s.topic, m.Partition, err)
		}
		start = end
	}
	return nil
}

// Load reads partition p of the changelog from its first to its last offset.
func (s *KafkaStore) Load(ctx context.Context, p int) (Snapshot, error) {
	snap := Snapshot{Keys: map[string]KeyRecord{}}
	conn, err := s.leader(ctx, p)
	if err != nil {
		return snap, err
	}
	defer conn.Close()
	err = kafkaread.Partition(ctx, conn, 0, func(msg kafka.Message) error {
		s.absorb(&snap, p, msg)
		return nil
	})
	if err != nil {
		return snap, fmt.Errorf("changelog %s partition %d: %w", s.topic, p, err)
	}
	return snap, nil
}

// absorb adds one changelog record to a snapshot.
func (s *KafkaStore) absorb(snap *Snapshot, p int, msg kafka.Message) {
	key := string(msg.Key)
	if key == markerKey {
		key = ""
	}
	if msg.Value == nil {
		return // a tombstone: the key was dropped
	}
	k, m, err := Decode(msg.Value)
	switch {
	case err != nil:
		snap.Corrupt = append(snap.Corrupt, Corruption{Key: key, Err: err})
	case m != nil && key == "" && m.Partition == p:
		snap.Marker = m
	case k != nil && k.Key == key && k.Partition == p:
		snap.put(*k)
	default:
		snap.Corrupt = append(snap.Corrupt, Corruption{Key: key, Err: fmt.Errorf("record does not match its key or partition %d: %w", p, ErrCorrupt)})
	}
}

// Close releases nothing: every call dials and closes its own connection.
func (s *KafkaStore) Close() error { return nil }
