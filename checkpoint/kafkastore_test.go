package checkpoint

import (
	"context"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// openKafkaStore starts an in-process broker with a compacted two-partition
// changelog topic and returns a store on it.
func openKafkaStore(t *testing.T) Store {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	must(t, err)
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	conn, err := kafka.Dial("tcp", addr)
	must(t, err)
	defer conn.Close()
	must(t, conn.CreateTopics(kafka.TopicConfig{Topic: "changelog", NumPartitions: 2, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}}))
	s, err := NewKafkaStore(&kafka.Dialer{}, []string{addr}, "changelog")
	must(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// Large checkpoints go out in several produce requests, and a garbled value
// is reported under its key while the key falls back to its previous record.
func TestKafkaStoreBatchesAndCorruption(t *testing.T) {
	s := openKafkaStore(t).(*KafkaStore)
	ctx := context.Background()
	must(t, s.Write(ctx, []KeyRecord{key(1, "a", 10, "a1"), key(1, "b", 11, "b1")}, Marker{Partition: 1, Through: [2]int64{11, NoOffset}}))
	big := make([]byte, 300<<10) // forces more than one produce request
	must(t, s.Write(ctx, []KeyRecord{key(1, "a", 20, "a2"), {Partition: 1, Key: "c", State: big}, {Partition: 1, Key: "d", State: big}}, Marker{Partition: 1, Through: [2]int64{25, NoOffset}}))
	snap, err := s.Load(ctx, 1)
	must(t, err)
	if string(snap.Keys["a"].State) != "a2" || len(snap.Keys["c"].State) != len(big) || len(snap.Keys) != 4 || snap.Marker.Through[0] != 25 || len(snap.Corrupt) != 0 {
		t.Fatalf("%d keys, marker %+v, corrupt %v", len(snap.Keys), snap.Marker, snap.Corrupt)
	}
	w, _ := kafka.DialLeader(ctx, "tcp", s.brokers[0], "changelog", 1)
	w.WriteMessages(kafka.Message{Key: []byte("a"), Value: []byte("garbage")})
	w.Close()
	snap, _ = s.Load(ctx, 1)
	if len(snap.Corrupt) != 1 || snap.Corrupt[0].Key != "a" || string(snap.Keys["a"].State) != "a2" || snap.ReplayFrom()[0] != 21 {
		t.Fatalf("corrupt: %+v, replay %v", snap.Corrupt, snap.ReplayFrom())
	}
}
