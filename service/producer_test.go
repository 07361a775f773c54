package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Outputs are keyed by the one default partitioner, cmd/producer's: a key's
// outputs go to the partition number of its inputs.
func TestOutputsUseTheDefaultPartitioner(t *testing.T) {
	var p OutputProducer
	parts := []int{0, 1, 2, 3, 4, 5, 6}
	moved := 0
	for i := range 500 {
		key := fmt.Appendf(nil, "customer-%d", i)
		want := topics.PartitionOf(key, len(parts))[topics.DefaultPartitioner]
		if got := p.balancer.Balance(kafka.Message{Key: key}, parts...); got != want {
			t.Fatalf("key %s: output partition %d, its inputs' %d", key, got, want)
		}
		if want != topics.PartitionOf(key, len(parts))["fnv1a"] {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("the hashes agree on every key: the test cannot tell them apart")
	}
}

// BenchmarkOutputProducer writes flushes of 2,000 small outputs over four
// partitions with OutputProducer and with the kafka-go Writer the service
// used before (batches of up to 4,096 messages or 1 MiB, a 200 µs batch
// timeout, acks = all), alternating them, and reports each one's rate and
// the process's CPU time per record (the in-process broker included).
//
//	go test -run '^$' -bench OutputProducer -benchtime 1x ./service
func BenchmarkOutputProducer(b *testing.B) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "out"), // 4 MiB segments, as benchCluster's
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(4 << 20)}))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	ctx := context.Background()
	const flushes, per = 50, 2000
	flush := func(f int) []kafka.Message {
		m := make([]kafka.Message, per)
		for i := range m {
			m[i] = kafka.Message{Key: fmt.Appendf(nil, "k%d", (f*per+i)%1000),
				Value: fmt.Appendf(nil, `{"id":"e%d","key":"k","label":1,"score":0.123456789,"learner":"perceptron","partition":0,"offset":%d}`, i, i)}
		}
		return m
	}
	writers := map[string]func(tr *kafka.Transport) (write func([]kafka.Message) error, close func()){
		"producer": func(tr *kafka.Transport) (func([]kafka.Message) error, func()) {
			p := NewOutputProducer(addrs, "out", tr, 0)
			return func(ms []kafka.Message) error { return p.Write(ctx, ms) }, func() {}
		},
		"kafka-go-writer": func(tr *kafka.Transport) (func([]kafka.Message) error, func()) {
			w := &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: "out", Balancer: kafka.Murmur2Balancer{}, BatchSize: 4096,
				BatchBytes: 1 << 20, BatchTimeout: 200 * time.Microsecond, RequiredAcks: kafka.RequireAll, Transport: tr}
			return func(ms []kafka.Message) error { return w.WriteMessages(ctx, ms...) }, func() { w.Close() }
		},
	}
	for round := range 3 {
		for _, name := range []string{"kafka-go-writer", "producer"} {
			b.Run(fmt.Sprintf("%s/round-%d", name, round), func(b *testing.B) {
				tr := &kafka.Transport{}
				defer tr.CloseIdleConnections()
				write, closeW := writers[name](tr)
				defer closeW()
				if err := write(flush(0)); err != nil { // metadata and connections
					b.Fatal(err)
				}
				cpu0, start := cpuNow(), time.Now()
				for f := range flushes {
					if err := write(flush(f)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(flushes*per)/time.Since(start).Seconds(), "records/s")
				b.ReportMetric((cpuNow()-cpu0).Seconds()/float64(flushes*per)*1e6, "cpu-µs/record")
			})
		}
	}
}

// producerCluster is a broker with topics "a" and "b" of the test
// partition count, and a request counter for topic a's produce requests:
// each request's record count, and the error code refuse answers it with
// (refuse sees the request's partition, number and records; 0 or a nil
// refuse accepts it).
func producerCluster(t *testing.T, refuse func(partition int32, n int, records []byte) int16) (addr string, requests func() (n, records int, sizes []int)) {
	t.Helper()
	c := kafkatest.Cluster(t, kfake.SeedTopics(partitions, "a", "b"))
	var mu sync.Mutex
	var count, recs int
	var sizes []int
	c.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		if len(pr.Topics) != 1 || pr.Topics[0].Topic != "a" || len(pr.Topics[0].Partitions) != 1 {
			return nil, nil, false
		}
		part := pr.Topics[0].Partitions[0]
		var batch kmsg.RecordBatch
		if err := batch.ReadFrom(part.Records); err != nil {
			t.Errorf("produce request: %v", err)
		}
		mu.Lock()
		count++
		n := count
		recs += int(batch.NumRecords)
		sizes = append(sizes, len(part.Records))
		mu.Unlock()
		if code := int16(0); refuse != nil {
			if code = refuse(part.Partition, n, part.Records); code != 0 {
				return kafkatest.ProduceRefused(pr, code), nil, true
			}
		}
		return nil, nil, false
	})
	return c.ListenAddrs()[0], func() (int, int, []int) {
		mu.Lock()
		defer mu.Unlock()
		return count, recs, slices.Clone(sizes)
	}
}

// outputs are n records over 100 keys, each value naming its place.
func outputs(n, valueBytes int) []kafka.Message {
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		v := fmt.Appendf(nil, "out-%06d-", i)
		v = append(v, bytes.Repeat([]byte{'x'}, max(0, valueBytes-len(v)))...)
		msgs[i] = kafka.Message{Key: fmt.Appendf(nil, "key-%d", i%100), Value: v}
	}
	return msgs
}

// values are the messages' values, as strings.
func values(msgs []kafka.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Value)
	}
	return out
}

// The producer puts each record on the partition kafka-go's Writer with
// the Hash balancer put it on (the service's outputs before), in the order
// given: consumers see the same partitioning.
func TestOutputProducerPartitionsAsTheWriterDid(t *testing.T) {
	addr, _ := producerCluster(t, nil)
	msgs := outputs(600, 20)
	if err := NewOutputProducer([]string{addr}, "a", nil, 0).Write(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "b", Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	place := func(topic string) map[int][]string {
		out := map[int][]string{}
		for _, m := range readAll(t, addr, topic) {
			out[m.Partition] = append(out[m.Partition], string(m.Key)+"="+string(m.Value))
		}
		return out
	}
	got, want := place("a"), place("b")
	differing := 0
	for p := range partitions {
		if !slices.Equal(got[p], want[p]) {
			differing++
		}
	}
	if n := len(readAll(t, addr, "a")); n != len(msgs) || differing != 0 {
		t.Fatalf("%d records written of %d; %d of %d partitions differ from the Writer's", n, len(msgs), differing, partitions)
	}
}

// A call of more than a request's worth of records is sent in several
// requests, each under the broker's 1 MiB, every record once and in order.
func TestOutputProducerSplitsLargeCalls(t *testing.T) {
	addr, requests := producerCluster(t, nil)
	msgs := outputs(3000, 1024) // about 3.2 MB
	if err := NewOutputProducer([]string{addr}, "a", nil, 0).Write(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	n, recs, sizes := requests()
	for _, s := range sizes {
		if s > 1<<20 {
			t.Errorf("a produce request of %d bytes of records, over 1 MiB", s)
		}
	}
	if n < 4 || recs != len(msgs) {
		t.Fatalf("%d requests carried %d records, want at least 4 requests and %d records", n, recs, len(msgs))
	}
	seen := map[string]int{}
	outOfOrder := 0
	last := map[int]string{}
	for _, m := range readAll(t, addr, "a") {
		seen[string(m.Value)]++
		if v := string(m.Value); v < last[m.Partition] {
			outOfOrder++
		}
		last[m.Partition] = string(m.Value)
	}
	missing, repeated := deliveries(values(msgs), seen)
	if missing != 0 || repeated != 0 || outOfOrder != 0 {
		t.Fatalf("%d missing, %d repeated, %d out of order", missing, repeated, outOfOrder)
	}
}

// A record no request can carry is refused without being sent, and the
// others are written: the call reports exactly that record, with kafka-go's
// MessageSizeTooLarge, which the Runner does not retry.
func TestOutputProducerRefusesOversizedRecords(t *testing.T) {
	addr, requests := producerCluster(t, nil)
	msgs := slices.Concat(outputs(10, 20), outputs(1, 2<<20), outputs(10, 20))
	err := NewOutputProducer([]string{addr}, "a", nil, 0).Write(context.Background(), msgs)
	var re *RefusedError
	if !errors.As(err, &re) || !errors.Is(err, kafka.MessageSizeTooLarge) || pipeline.IsRetriable(err) {
		t.Fatalf("error %v, want a permanent MessageSizeTooLarge refusal", err)
	}
	if len(re.Refused) != 1 || re.Refused[0].Index != 10 {
		t.Fatalf("refused %+v, want record 10 alone", re.Refused)
	}
	_, recs, sizes := requests()
	if recs != 20 || slices.Max(sizes) > pipeline.DefaultMaxMessageBytes {
		t.Fatalf("%d records sent in requests of up to %d bytes, want the 20 others within the limit", recs, slices.Max(sizes))
	}
}

// A record the broker refuses (MESSAGE_TOO_LARGE, CORRUPT_MESSAGE or
// INVALID_RECORD, each a verdict on a record) is found by sending its
// request again a record at a time; every other record is written exactly
// once, in order, and the call names the refused record alone.
func TestOutputProducerIsolatesARefusedRecord(t *testing.T) {
	for _, e := range []*kerr.Error{kerr.MessageTooLarge, kerr.CorruptMessage, kerr.InvalidRecord} {
		code := e.Code
		t.Run(e.Message, func(t *testing.T) {
			addr, _ := producerCluster(t, func(_ int32, _ int, records []byte) int16 {
				if bytes.Contains(records, []byte("poison")) {
					return code
				}
				return 0
			})
			msgs := outputs(300, 20)
			msgs[123].Value = []byte("poison-123")
			err := NewOutputProducer([]string{addr}, "a", nil, 0).Write(context.Background(), msgs)
			var re *RefusedError
			if !errors.As(err, &re) || len(re.Refused) != 1 || re.Refused[0].Index != 123 {
				t.Fatalf("error %v, want record 123 refused alone", err)
			}
			seen, outOfOrder, last := map[string]int{}, 0, map[int]string{}
			for _, m := range readAll(t, addr, "a") {
				seen[string(m.Value)]++
				if v := string(m.Value); v < last[m.Partition] {
					outOfOrder++
				}
				last[m.Partition] = string(m.Value)
			}
			want := values(slices.Delete(slices.Clone(msgs), 123, 124))
			missing, repeated := deliveries(want, seen)
			if missing != 0 || repeated != 0 || outOfOrder != 0 || seen["poison-123"] != 0 {
				t.Fatalf("%d missing, %d repeated, %d out of order, %d poison written", missing, repeated, outOfOrder, seen["poison-123"])
			}
		})
	}
}

// A partition the broker refuses fails the call with a retriable error that
// names it; the other partitions' records are written, so the caller's
// retry repeats exactly those, and writes the refused ones once.
func TestOutputProducerReportsRefusedPartitions(t *testing.T) {
	addr, requests := producerCluster(t, func(p int32, n int, _ []byte) int16 {
		if p == 1 && n <= partitions {
			return kerr.NotLeaderForPartition.Code
		}
		return 0
	})
	msgs := outputs(300, 20)
	prod := NewOutputProducer([]string{addr}, "a", nil, 0)
	err := prod.Write(context.Background(), msgs)
	if err == nil || !pipeline.IsRetriable(err) || !strings.Contains(err.Error(), "1 of 3 partitions of a failed, first: partition 1: ") {
		t.Fatalf("error %v, want partition 1 refused, retriable", err)
	}
	if err := prod.Write(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	inRefused := 0
	for _, m := range readAll(t, addr, "a") {
		if m.Partition == 1 {
			inRefused++
		}
	}
	seen := map[string]int{}
	for _, m := range readAll(t, addr, "a") {
		seen[string(m.Value)]++
	}
	missing, repeated := deliveries(values(msgs), seen)
	if n, _, _ := requests(); missing != 0 || repeated != len(msgs)-inRefused || n != 2*partitions {
		t.Fatalf("%d missing, %d repeated (want %d: the records of the partitions that were written), %d requests (want %d)",
			missing, repeated, len(msgs)-inRefused, n, 2*partitions)
	}
}

// A partition whose leader kafka-go's metadata cache does not know (leader
// -1: a broker restarting, an election) fails kafka-go's Produce on the
// client side with protocol.ErrNoLeader, before any request is sent. The
// call fails with a retriable error naming the partition, not a permanent
// one that ends the partition (the broker-outage run on Apache Kafka 4.4.0
// ended three partitions on exactly this); the other partitions are written,
// and once the metadata names a leader again the retry writes the rest,
// every record once.
func TestOutputProducerRetriesALeaderlessPartition(t *testing.T) {
	c := kafkatest.Cluster(t, kfake.SeedTopics(partitions, "a"))
	addr := c.ListenAddrs()[0]
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portText)
	var leaderless atomic.Bool
	var answered atomic.Int32
	leaderless.Store(true)
	c.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !leaderless.Load() {
			return nil, nil, false
		}
		answered.Add(1)
		resp := req.(*kmsg.MetadataRequest).ResponseKind().(*kmsg.MetadataResponse)
		node := c.CurrentNode()
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = node, host, int32(port)
		resp.Brokers, resp.ControllerID = append(resp.Brokers, b), node
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr("a")
		for p := range int32(partitions) {
			rp := kmsg.NewMetadataResponseTopicPartition()
			rp.Partition, rp.Leader, rp.Replicas, rp.ISR = p, node, []int32{node}, []int32{node}
			if p == 1 {
				rp.Leader, rp.ErrorCode = -1, kerr.LeaderNotAvailable.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	msgs := outputs(300, 20)
	prod := NewOutputProducer([]string{addr}, "a", &kafka.Transport{MetadataTTL: 50 * time.Millisecond}, 0)
	err = prod.Write(context.Background(), msgs)
	if err == nil || !errors.Is(err, protocol.ErrNoLeader) || !pipeline.IsRetriable(err) ||
		!strings.Contains(err.Error(), "1 of 3 partitions of a failed, first: partition 1: ") {
		t.Fatalf("error %v, want partition 1 leaderless, retriable", err)
	}
	if answered.Load() == 0 {
		t.Fatal("no metadata request was answered leaderless: the test injected nothing")
	}
	leaderless.Store(false)
	written := len(readAll(t, addr, "a"))
	deadline, calls := time.Now().Add(10*time.Second), 1
	for err = prod.Write(context.Background(), msgs); err != nil; err = prod.Write(context.Background(), msgs) {
		if !pipeline.IsRetriable(err) || time.Now().After(deadline) {
			t.Fatalf("after the leader is back: %v", err)
		}
		calls++ // until kafka-go's cache refreshes, a call writes the other partitions again
		time.Sleep(20 * time.Millisecond)
	}
	seen := map[string]int{}
	inLeaderless := 0
	for _, m := range readAll(t, addr, "a") {
		seen[string(m.Value)]++
		if m.Partition == 1 {
			inLeaderless++
		}
	}
	missing, repeated := deliveries(values(msgs), seen)
	if missing != 0 || written != len(msgs)-inLeaderless || repeated != calls*written {
		t.Fatalf("%d missing, %d repeated (want %d: the other partitions' records once per retry, %d retries), %d written by the first call (want %d)",
			missing, repeated, calls*written, calls, written, len(msgs)-inLeaderless)
	}
	t.Logf("%d retries until kafka-go's metadata named the leader; %d records repeated, 0 missing", calls, repeated)
}
