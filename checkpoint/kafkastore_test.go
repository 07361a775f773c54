package checkpoint

import (
	"context"
	"errors"
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
	c := kafkatest.Cluster(t)
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

// LoadRange reads exactly the records of its range — from inside a produce
// request's batch too, and none of the records after it — under the
// fencing rule, and reports ErrTailGone once retention deleted the range's
// start.
func TestKafkaStoreLoadRange(t *testing.T) {
	_, s := kafkaStoreCluster(t)
	ctx := context.Background()
	const p = 1
	ours := NextEpoch(0, 1)
	owner := Ownership{Partition: p, Epoch: ours, Owner: "us"}
	if _, err := s.ClaimAt(ctx, owner); err != nil {
		t.Fatal(err)
	}
	m := marker(p, ours, 10)
	end, err := s.WriteAt(ctx, at(ours, key(p, "a", 5, "a@5"), key(p, "b", 10, "b@10")), m)
	must(t, err)
	// Another owner, then a zombie of ours, then our next claim.
	theirs := NextEpoch(ours, 2)
	must(t, s.Claim(ctx, Ownership{Partition: p, Epoch: theirs, Owner: "them"}))
	must(t, s.Write(ctx, at(theirs, key(p, "a", 20, "a@20"), key(p, "c", 21, "c@21")), marker(p, theirs, 21)))
	must(t, s.Write(ctx, at(ours, key(p, "b", 30, "zombie"), key(p, "d", 31, "zombie")), marker(p, ours, 31)))
	next, err := s.ClaimAt(ctx, Ownership{Partition: p, Epoch: NextEpoch(theirs, 3), Owner: "us"})
	must(t, err)

	held := map[string]*KeyRecord{"a": {Partition: p, Key: "a", Epoch: ours, AppliedThrough: [2]int64{5, NoOffset}, State: []byte("a@5")},
		"b": {Partition: p, Key: "b", Epoch: ours, AppliedThrough: [2]int64{10, NoOffset}, State: []byte("b@10")}}
	sink := &mapSink{keys: held}
	snap, err := Resume(sink, owner, m)
	must(t, err)
	must(t, s.LoadRange(ctx, p, end, next, snap))
	got := map[string]string{}
	for k, rec := range sink.keys {
		got[k] = string(rec.State)
	}
	want := map[string]string{"a": "a@20", "b": "b@10", "c": "c@21", "d": "zombie"}
	if fmt.Sprint(got) != fmt.Sprint(want) || snap.Owner.Epoch != theirs || snap.Marker.Epoch != theirs || snap.Marker.Through[0] != 21 ||
		snap.MaxEpoch != theirs || snap.Fenced != 3 || len(snap.Corrupt) != 1 || snap.Corrupt[0].Key != "d" {
		t.Fatalf("keys %v (want %v), owner %+v, marker %+v, max epoch %v, fenced %d (want 3), corrupt %v", got, want, snap.Owner, snap.Marker, snap.MaxEpoch, snap.Fenced, snap.Corrupt)
	}

	// From inside the other owner's produce request: only c and its marker.
	sink = &mapSink{keys: map[string]*KeyRecord{}}
	snap, err = Resume(sink, owner, m)
	must(t, err)
	must(t, s.LoadRange(ctx, p, end+2, end+4, snap))
	if len(sink.keys) != 1 || string(sink.keys["c"].State) != "c@21" || snap.Marker.Through[0] != 21 || snap.Fenced != 0 {
		t.Fatalf("keys %v, marker %+v, fenced %d", sink.keys, snap.Marker, snap.Fenced)
	}

	kafkatest.DeleteRecords(t, s.brokers[0], "changelog", p, end+1)
	snap, _ = Resume(&mapSink{keys: map[string]*KeyRecord{}}, owner, m)
	if err := s.LoadRange(ctx, p, end, next, snap); !errors.Is(err, ErrTailGone) {
		t.Fatalf("a range whose start was deleted: %v, want ErrTailGone", err)
	}
}
