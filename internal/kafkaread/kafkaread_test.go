package kafkaread

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicOf returns a broker holding n records (values "v0", "v1", ...) in
// partition 0 of topic t.
func topicOf(t *testing.T, n int) string {
	t.Helper()
	_, addr := clusterOf(t, n)
	return addr
}

// clusterOf is topicOf's broker, and its address.
func clusterOf(t *testing.T, n int) (*kfake.Cluster, string) {
	t.Helper()
	c := kafkatest.Cluster(t, kfake.SeedTopics(1, "t"))
	addr := c.ListenAddrs()[0]
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "t", BatchTimeout: time.Millisecond, BatchSize: 10_000, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: fmt.Appendf(nil, "v%d", i)}
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	return c, addr
}

// followT is Follow of topic t's partition 0 at addr, through a transport
// of the test's.
func followT(t *testing.T, ctx context.Context, addr string, cfg FollowConfig, fn func([]kafka.Message, int64) error) error {
	t.Helper()
	cfg.Topic, cfg.Partition = "t", 0
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return Follow(ctx, tr, kafka.TCP(addr), cfg, fn)
}

// follow collects what Follow hands over, checking order and batch sizes.
func follow(t *testing.T, ctx context.Context, addr string, cfg FollowConfig) (offsets []int64, err error) {
	t.Helper()
	err = followT(t, ctx, addr, cfg, func(batch []kafka.Message, hwm int64) error {
		if len(batch) == 0 || (cfg.MaxBatch > 0 && len(batch) > cfg.MaxBatch) {
			t.Errorf("batch of %d records (max %d)", len(batch), cfg.MaxBatch)
		}
		for _, m := range batch {
			if string(m.Value) != fmt.Sprintf("v%d", m.Offset) {
				t.Errorf("offset %d holds %q", m.Offset, m.Value)
			}
			if hwm <= m.Offset {
				t.Errorf("high watermark %d at offset %d", hwm, m.Offset)
			}
			offsets = append(offsets, m.Offset)
		}
		return nil
	})
	return offsets, err
}

// contiguous fails unless offsets are exactly from, from+1, ..., to-1.
func contiguous(t *testing.T, offsets []int64, from, to int64) {
	t.Helper()
	if int64(len(offsets)) != to-from {
		t.Fatalf("%d records, want %d (offsets %d to %d)", len(offsets), to-from, from, to-1)
	}
	for i, o := range offsets {
		if o != from+int64(i) {
			t.Fatalf("record %d has offset %d, want %d", i, o, from+int64(i))
		}
	}
}

func TestFollowReadsARangeInBatches(t *testing.T) {
	addr := topicOf(t, 3000)
	for _, tc := range []struct {
		from, end int64
		maxBatch  int
	}{{0, 3000, 0}, {100, 2900, 64}, {2999, 3000, 1}, {500, 500 + 1, 7}} {
		t.Run(fmt.Sprintf("%d-%d-by-%d", tc.from, tc.end, tc.maxBatch), func(t *testing.T) {
			got, err := follow(t, context.Background(), addr, FollowConfig{From: tc.from, End: tc.end, MaxBatch: tc.maxBatch})
			if err != nil {
				t.Fatal(err)
			}
			contiguous(t, got, tc.from, tc.end)
		})
	}
}

// Without an end, Follow waits at the end of the partition, and returns
// ctx's error, promptly, when ctx ends there.
func TestFollowStopsWhenCtxEnds(t *testing.T) {
	addr := topicOf(t, 200)
	ctx, cancel := context.WithCancel(context.Background())
	var got []int64
	done := make(chan error, 1)
	go func() {
		var err error
		got, err = follow(t, ctx, addr, FollowConfig{From: 50, MaxWait: time.Second})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // at the end, in a fetch held by the broker
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not return after ctx ended")
	}
	contiguous(t, got, 50, 200)
}

// At the end of the partition, fetches that find nothing (kafka-go reports
// them as timed out) are no error: Follow waits, and hands over what arrives
// later.
func TestFollowWaitsAtTheEnd(t *testing.T) {
	addr := topicOf(t, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan int64, 100)
	done := make(chan error, 1)
	go func() {
		done <- followT(t, ctx, addr, FollowConfig{From: 0, MaxWait: 10 * time.Millisecond}, func(batch []kafka.Message, _ int64) error {
			for _, m := range batch {
				got <- m.Offset
			}
			return nil
		})
	}()
	time.Sleep(200 * time.Millisecond) // twenty empty fetches
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "t", BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	for i := 10; i < 15; i++ {
		if err := w.WriteMessages(context.Background(), kafka.Message{Value: fmt.Appendf(nil, "v%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for want := int64(0); want < 15; want++ {
		select {
		case o := <-got:
			if o != want {
				t.Fatalf("offset %d, want %d", o, want)
			}
		case err := <-done:
			t.Fatalf("Follow ended at offset %d: %v", want, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("offset %d never came", want)
		}
	}
}

// Records deleted before they were read are reported through Deleted, and
// reading starts at the first record kept: nothing is skipped silently.
func TestFollowReportsDeletedRecords(t *testing.T) {
	addr := topicOf(t, 1000)
	kafkatest.DeleteRecords(t, addr, "t", 0, 300)
	var deleted [][2]int64
	got, err := follow(t, context.Background(), addr, FollowConfig{From: 100, End: 1000,
		Deleted: func(from, first int64) error { deleted = append(deleted, [2]int64{from, first}); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[0] != [2]int64{100, 300} {
		t.Fatalf("Deleted told %v, want once (100, 300)", deleted)
	}
	contiguous(t, got, 300, 1000)
}

// An error from fn stops Follow with that error.
func TestFollowStopsAtTheCallersError(t *testing.T) {
	addr := topicOf(t, 100)
	stop := errors.New("enough")
	calls := 0
	err := followT(t, context.Background(), addr, FollowConfig{MaxBatch: 10}, func([]kafka.Message, int64) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Fatalf("err = %v after %d calls, want %v after 3", err, calls, stop)
	}
}

// Apache Kafka answers a fetch below the log start with OFFSET_OUT_OF_RANGE
// and a log start of −1: the start is then asked for (ListOffsets), the
// deleted records are reported, and reading goes on from the first kept.
func TestFollowFindsTheLogStartApacheKafkaDoesNotGive(t *testing.T) {
	c, addr := clusterOf(t, 1000)
	kafkatest.DeleteRecords(t, addr, "t", 0, 300)
	answered := 0
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 || fr.Topics[0].Partitions[0].FetchOffset >= 300 {
			return nil, nil, false
		}
		answered++
		res := kafkatest.FetchRefused(fr, kerr.OffsetOutOfRange.Code)
		if start := res.Topics[0].Partitions[0].LogStartOffset; start != -1 { // as Apache Kafka answers
			t.Errorf("the refused fetch says log start %d, want -1", start)
		}
		return res, nil, true
	})
	var deleted [][2]int64
	got, err := follow(t, context.Background(), addr, FollowConfig{From: 100, End: 1000,
		Deleted: func(from, first int64) error { deleted = append(deleted, [2]int64{from, first}); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if answered != 1 || len(deleted) != 1 || deleted[0] != [2]int64{100, 300} {
		t.Fatalf("%d fetches answered out of range; Deleted told %v, want once (100, 300)", answered, deleted)
	}
	contiguous(t, got, 300, 1000)
}
