package checkpoint

import (
	"context"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The changelog store against an in-process Kafka broker over TCP.
func TestKafkaStore(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.CreateTopics(kafka.TopicConfig{Topic: "changelog", NumPartitions: 2, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := NewKafkaStore(&kafka.Dialer{}, []string{addr}, "changelog")
	if err != nil {
		t.Fatal(err)
	}
	if snap, err := s.Load(ctx, 1); err != nil || len(snap.Keys) != 0 || snap.Marker != nil {
		t.Fatalf("empty: %+v %v", snap, err)
	}
	must(t, s.Write(ctx, []KeyRecord{key(1, "a", 10, "a1"), key(1, "b", 11, "b1")}, Marker{Partition: 1, Through: [2]int64{11, NoOffset}}))
	big := make([]byte, 300<<10) // forces more than one produce request
	must(t, s.Write(ctx, []KeyRecord{key(1, "a", 20, "a2"), {Partition: 1, Key: "c", State: big}, {Partition: 1, Key: "d", State: big}}, Marker{Partition: 1, Through: [2]int64{25, NoOffset}}))
	snap, err := s.Load(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(snap.Keys["a"].State) != "a2" || len(snap.Keys["c"].State) != len(big) || len(snap.Keys) != 4 || snap.Marker.Through[0] != 25 || len(snap.Corrupt) != 0 {
		t.Fatalf("%d keys, marker %+v, corrupt %v", len(snap.Keys), snap.Marker, snap.Corrupt)
	}
	// A garbled value for "a" is reported under its key; "a" falls back to a2.
	w, _ := kafka.DialLeader(ctx, "tcp", addr, "changelog", 1)
	w.WriteMessages(kafka.Message{Key: []byte("a"), Value: []byte("garbage")})
	w.Close()
	snap, _ = s.Load(ctx, 1)
	if len(snap.Corrupt) != 1 || snap.Corrupt[0].Key != "a" || string(snap.Keys["a"].State) != "a2" || snap.ReplayFrom()[0] != 21 {
		t.Fatalf("corrupt: %+v, replay %v", snap.Corrupt, snap.ReplayFrom())
	}
}
