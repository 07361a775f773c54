package checkpoint

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// openKafkaStore starts an in-process broker with a compacted two-partition
// changelog topic and returns a store on it.
func openKafkaStore(t *testing.T) Store {
	t.Helper()
	_, s := kafkaStoreCluster(t)
	return s
}

// kafkaStoreCluster is openKafkaStore with the broker, for tests that
// control its answers.
func kafkaStoreCluster(t *testing.T) (*kfake.Cluster, *KafkaStore) {
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
	return c, s
}

// Large checkpoints go out in several produce requests, and a garbled value
// is reported under its key while the key falls back to its previous record.
func TestKafkaStoreBatchesAndCorruption(t *testing.T) {
	s := openKafkaStore(t).(*KafkaStore)
	ctx := context.Background()
	must(t, s.Write(ctx, []KeyRecord{key(1, "a", 10, "a1"), key(1, "b", 11, "b1")}, Marker{Partition: 1, Through: [2]int64{11, NoOffset}}))
	big := make([]byte, 300<<10) // forces more than one produce request
	must(t, s.Write(ctx, []KeyRecord{key(1, "a", 20, "a2"), {Partition: 1, Key: "c", State: big}, {Partition: 1, Key: "d", State: big}}, Marker{Partition: 1, Through: [2]int64{25, NoOffset}}))
	snap, err := s.Load(ctx, 1, nil)
	must(t, err)
	if string(snap.Keys["a"].State) != "a2" || len(snap.Keys["c"].State) != len(big) || len(snap.Keys) != 4 || snap.Marker.Through[0] != 25 || len(snap.Corrupt) != 0 {
		t.Fatalf("%d keys, marker %+v, corrupt %v", len(snap.Keys), snap.Marker, snap.Corrupt)
	}
	w, _ := kafka.DialLeader(ctx, "tcp", s.brokers[0], "changelog", 1)
	w.WriteMessages(kafka.Message{Key: []byte("a"), Value: []byte("garbage")})
	w.Close()
	snap, _ = s.Load(ctx, 1, nil)
	if len(snap.Corrupt) != 1 || snap.Corrupt[0].Key != "a" || string(snap.Keys["a"].State) != "a2" || snap.ReplayFrom()[0] != 21 {
		t.Fatalf("corrupt: %+v, replay %v", snap.Corrupt, snap.ReplayFrom())
	}
}

// Load reads the changelog on one goroutine and absorbs it on another, in
// chunks of loadChunk records: records that span several chunks, and keys
// rewritten in a later checkpoint, come back exactly once each with their
// last state.
func TestKafkaStoreLoadsAcrossChunks(t *testing.T) {
	s := openKafkaStore(t).(*KafkaStore)
	ctx := context.Background()
	n := 2*loadChunk + loadChunk/2
	var first, second []KeyRecord
	for i := range n {
		first = append(first, key(0, fmt.Sprintf("k%05d", i), int64(i), fmt.Sprintf("first-%d", i)))
		if i%3 == 0 {
			second = append(second, key(0, fmt.Sprintf("k%05d", i), int64(n+i), fmt.Sprintf("second-%d", i)))
		}
	}
	must(t, s.Write(ctx, first, Marker{Partition: 0, Through: [2]int64{int64(n - 1), NoOffset}}))
	must(t, s.Write(ctx, second, Marker{Partition: 0, Through: [2]int64{int64(2*n - 1), NoOffset}}))
	snap, err := s.Load(ctx, 0, nil)
	must(t, err)
	if len(snap.Keys) != n || len(snap.Corrupt) != 0 || len(snap.Ignored) != 0 || snap.Marker.Through[0] != int64(2*n-1) {
		t.Fatalf("%d keys of %d, %d corrupt, %d ignored, marker %+v", len(snap.Keys), n, len(snap.Corrupt), len(snap.Ignored), snap.Marker)
	}
	wrong := 0
	for i := range n {
		want := fmt.Sprintf("first-%d", i)
		if i%3 == 0 {
			want = fmt.Sprintf("second-%d", i)
		}
		if r := snap.Keys[fmt.Sprintf("k%05d", i)]; r == nil || string(r.State) != want {
			wrong++
		}
	}
	if wrong != 0 {
		t.Fatalf("%d of %d keys missing or not at their last state", wrong, n)
	}
}

// A fetch the broker refuses while the changelog is read is Load's error,
// naming the partition, not a snapshot cut short.
func TestKafkaStoreLoadFailsOnFetchError(t *testing.T) {
	c, s := kafkaStoreCluster(t)
	ctx := context.Background()
	var recs []KeyRecord
	for i := range loadChunk + 10 {
		recs = append(recs, key(1, fmt.Sprintf("k%05d", i), int64(i), "state"))
	}
	must(t, s.Write(ctx, recs, Marker{Partition: 1, Through: [2]int64{int64(len(recs) - 1), NoOffset}}))
	var refused atomic.Int64
	c.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		refused.Add(1)
		return kafkatest.FetchRefused(req.(*kmsg.FetchRequest), kerr.NotLeaderForPartition.Code), nil, true
	})
	snap, err := s.Load(ctx, 1, nil)
	if err == nil || !strings.Contains(err.Error(), "changelog changelog partition 1") || !strings.Contains(err.Error(), "Not Leader") {
		t.Fatalf("Load: err %v with %d keys, want a refused fetch of partition 1", err, len(snap.Keys))
	}
	if refused.Load() != 1 {
		t.Fatalf("%d fetches refused, want 1 (Load does not retry; its caller does)", refused.Load())
	}
}
