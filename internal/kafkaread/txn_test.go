package kafkaread

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The filter alone, on batches laid out by hand: producers 7 and 8 write
// interleaved transactions, 7's first one aborted, 8's committed, then 7
// retries in a new transaction that commits; producer 9 writes without a
// transaction.
func TestAbortFilter(t *testing.T) {
	type batch struct {
		base, pid     int64
		transactional bool
		control       int // -1 data, 0 abort marker, 1 commit marker
		want          bool
	}
	layout := []batch{
		{0, 9, false, -1, true},
		{1, 7, true, -1, false}, // 7's aborted transaction starts here
		{3, 8, true, -1, true},
		{4, 7, true, -1, false},
		{6, 9, false, -1, true}, // no transaction: always kept
		{7, 8, true, 1, false},  // commit marker of 8
		{8, 7, true, 0, false},  // abort marker of 7
		{9, 7, true, -1, true},  // 7's next transaction: not aborted
		{10, 7, true, 1, false},
	}
	f := newAbortFilter([]AbortedTxn{{ProducerID: 7, FirstOffset: 1}})
	for _, b := range layout {
		var got bool
		if b.control >= 0 {
			f.control(b.base, b.pid, b.control == 0)
		} else {
			got = f.keep(b.base, b.pid, b.transactional)
		}
		if got != b.want {
			t.Errorf("batch at %d of producer %d: kept %v, want %v", b.base, b.pid, got, b.want)
		}
	}
}

// txnBroker is an in-process broker with topic t of parts partitions.
func txnBroker(t *testing.T, parts int) string {
	t.Helper()
	c := kafkatest.Cluster(t, kfake.SeedTopics(int32(parts), "t"))
	return c.ListenAddrs()[0]
}

// txnProducer is a franz-go client with a transactional id, writing to the
// partition each record names.
func txnProducer(t *testing.T, addr, id string) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if id != "" {
		opts = append(opts, kgo.TransactionalID(id))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produce(t *testing.T, cl *kgo.Client, p int, values ...string) {
	t.Helper()
	for _, v := range values {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Partition: int32(p), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", v, err)
		}
	}
}

func begin(t *testing.T, cl *kgo.Client) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
}

func end(t *testing.T, cl *kgo.Client, commit kgo.TransactionEndTry) {
	t.Helper()
	if err := cl.EndTransaction(context.Background(), commit); err != nil {
		t.Fatal(err)
	}
}

// readAll follows partition p from 0 to its end as it is now, returning the
// values handed over and the lag of the last one (the end reported with it,
// less its offset and one).
func readAll(t *testing.T, addr string, p int, iso Isolation) (values []string, lastLag int64) {
	t.Helper()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	hwm, err := kafka.DialLeader(context.Background(), "tcp", addr, "t", p)
	if err != nil {
		t.Fatal(err)
	}
	_, last, err := hwm.ReadOffsets()
	hwm.Close()
	if err != nil {
		t.Fatal(err)
	}
	if iso == ReadCommitted {
		if last, err = StableOffset(context.Background(), tr, kafka.TCP(addr), "t", p); err != nil {
			t.Fatal(err)
		}
	}
	err = Follow(context.Background(), tr, kafka.TCP(addr), FollowConfig{Topic: "t", Partition: p, End: last, Isolation: iso},
		func(batch []kafka.Message, e int64) error {
			for _, m := range batch {
				values = append(values, string(m.Value))
			}
			lastLag = e - batch[len(batch)-1].Offset - 1
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return values, lastLag
}

// Committed, aborted and plain records interleaved on three partitions, two
// transactional producers with transactions open at once: read committed
// hands over exactly the committed and plain records, in offset order;
// read uncommitted every data record; neither a transaction marker.
func TestFollowReadsCommittedRecordsOnly(t *testing.T) {
	addr := txnBroker(t, 3)
	a, b, plain := txnProducer(t, addr, "a"), txnProducer(t, addr, "b"), txnProducer(t, addr, "")
	want := map[int][]string{}
	all := map[int][]string{}
	write := func(cl *kgo.Client, p int, v string, kept bool) {
		produce(t, cl, p, v)
		all[p] = append(all[p], v)
		if kept {
			want[p] = append(want[p], v)
		}
	}
	for round := range 4 {
		commitA := round%2 == 0
		begin(t, a)
		begin(t, b)
		for p := range 3 {
			for i := range 3 {
				write(a, p, fmt.Sprintf("a%d-p%d-%d", round, p, i), commitA)
				write(b, p, fmt.Sprintf("b%d-p%d-%d", round, p, i), !commitA)
				write(plain, p, fmt.Sprintf("plain%d-p%d-%d", round, p, i), true)
			}
		}
		end(t, a, kgo.TransactionEndTry(commitA))
		end(t, b, kgo.TransactionEndTry(!commitA))
	}
	for p := range 3 {
		got, lag := readAll(t, addr, p, ReadCommitted)
		if !slices.Equal(got, want[p]) {
			t.Errorf("partition %d, read committed: %d records %v\nwant %d: %v", p, len(got), got, len(want[p]), want[p])
		}
		if len(got) != 4*3*2 { // per round: 3 plain and 3 of the committing producer
			t.Errorf("partition %d: %d committed records, want 24", p, len(got))
		}
		// The partition ends with two transaction markers: read to its end,
		// it shows no lag.
		if lag != 0 {
			t.Errorf("partition %d read to its end shows a lag of %d", p, lag)
		}
		got, _ = readAll(t, addr, p, ReadUncommitted)
		if !slices.Equal(got, all[p]) || len(got) != 4*3*3 {
			t.Errorf("partition %d, read uncommitted: %d records, want %d", p, len(got), len(all[p]))
		}
	}
}

// The end Follow reports for lag counts no transaction marker: the last
// record of a partition read to its end has lag 0.
func TestFollowEndSkipsMarkers(t *testing.T) {
	addr := txnBroker(t, 1)
	a := txnProducer(t, addr, "a")
	begin(t, a)
	produce(t, a, 0, "x", "y")
	end(t, a, kgo.TryCommit)
	var lastOffset, lastEnd int64
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	stable, err := StableOffset(context.Background(), tr, kafka.TCP(addr), "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if stable != 3 { // two records and the commit marker
		t.Fatalf("last stable offset %d, want 3", stable)
	}
	err = Follow(context.Background(), tr, kafka.TCP(addr), FollowConfig{Topic: "t", End: stable}, func(batch []kafka.Message, e int64) error {
		lastOffset, lastEnd = batch[len(batch)-1].Offset, e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if lag := lastEnd - lastOffset - 1; lastOffset != 1 || lag != 0 {
		t.Fatalf("last record at %d with end %d (lag %d), want offset 1, lag 0", lastOffset, lastEnd, lag)
	}
}

// A transaction left open holds back, at read committed, its own records
// and every record written after its first one, plain ones too, until it
// ends; then the committed ones arrive and the aborted ones never do.
func TestFollowWaitsForAnOpenTransaction(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			addr := txnBroker(t, 1)
			a, plain := txnProducer(t, addr, "a"), txnProducer(t, addr, "")
			produce(t, plain, 0, "p0")
			begin(t, a)
			produce(t, a, 0, "t0", "t1")
			produce(t, plain, 0, "p1", "p2")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan string, 100)
			done := make(chan error, 1)
			tr := &kafka.Transport{}
			defer tr.CloseIdleConnections()
			go func() {
				done <- Follow(ctx, tr, kafka.TCP(addr), FollowConfig{Topic: "t", MaxWait: 20 * time.Millisecond}, func(batch []kafka.Message, _ int64) error {
					for _, m := range batch {
						got <- string(m.Value)
					}
					return nil
				})
			}()
			expect := func(want ...string) {
				t.Helper()
				for _, w := range want {
					select {
					case v := <-got:
						if v != w {
							t.Fatalf("got %q, want %q", v, w)
						}
					case err := <-done:
						t.Fatalf("Follow ended: %v", err)
					case <-time.After(5 * time.Second):
						t.Fatalf("%q never came", w)
					}
				}
			}
			expect("p0")
			select { // a fetch's worth of time: nothing past the open transaction
			case v := <-got:
				t.Fatalf("%q read while the transaction before it is open", v)
			case <-time.After(300 * time.Millisecond):
			}
			end(t, a, kgo.TransactionEndTry(commit))
			if commit {
				expect("t0", "t1", "p1", "p2")
			} else {
				expect("p1", "p2")
			}
			produce(t, plain, 0, "p3")
			expect("p3")
			cancel()
			<-done
			if len(got) != 0 {
				t.Fatalf("%d records more than expected", len(got))
			}
		})
	}
}

// An exactly-once producer that retries an aborted batch in a new
// transaction: the committed copy is read once, the aborted one never.
func TestFollowReadsARetriedTransactionOnce(t *testing.T) {
	addr := txnBroker(t, 1)
	a := txnProducer(t, addr, "a")
	begin(t, a)
	produce(t, a, 0, "e1", "e2")
	end(t, a, kgo.TryAbort)
	begin(t, a)
	produce(t, a, 0, "e1", "e2")
	end(t, a, kgo.TryCommit)
	got, _ := readAll(t, addr, 0, ReadCommitted)
	if !slices.Equal(got, []string{"e1", "e2"}) {
		t.Fatalf("read %v, want [e1 e2] once", got)
	}
}
