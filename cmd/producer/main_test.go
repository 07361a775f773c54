package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/streams"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

func broker(t *testing.T, topics ...string) string {
	t.Helper()
	c := kafkatest.Cluster(t)
	addr := c.ListenAddrs()[0]
	conn, _ := kafka.Dial("tcp", addr)
	for _, tp := range topics {
		conn.CreateTopics(kafka.TopicConfig{Topic: tp, NumPartitions: 2, ReplicationFactor: 1})
	}
	conn.Close()
	return addr
}

func readTopic(t *testing.T, addr, topic string) []kafka.Message {
	t.Helper()
	var out []kafka.Message
	for p := 0; p < 2; p++ {
		c, err := kafka.DialLeader(context.Background(), "tcp", addr, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := kafkaread.Partition(context.Background(), c, 0, func(m kafka.Message) error { out = append(out, m); return nil }); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	return out
}

func TestSynthWithDelayedLabels(t *testing.T) {
	addr := broker(t, "events", "labels")
	var errb bytes.Buffer
	code := run(context.Background(), []string{"synth", "-generator", "sea?T=300", "-brokers", addr, "-keys", "7", "-labels-delay", "10", "-labels-topic", "labels"}, &bytes.Buffer{}, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	events, labels := readTopic(t, addr, "events"), readTopic(t, addr, "labels")
	if len(events) != 300 || len(labels) != 300 {
		t.Fatalf("%d events, %d labels", len(events), len(labels))
	}
	keys := map[string]bool{}
	for _, m := range events {
		keys[string(m.Key)] = true
		var ev map[string]any
		json.Unmarshal(m.Value, &ev)
		if _, has := ev["label"]; has || ev["id"] == nil || len(ev["x"].([]any)) != 3 {
			t.Fatalf("event %s", m.Value)
		}
	}
	if len(keys) != 7 {
		t.Fatalf("%d keys, want 7", len(keys))
	}
	// Every record is stamped as backtest.Messages stamps the same source
	// (MessageOptions.Clock), so that the service's merge of the two topics
	// by timestamp takes them in the order they were generated.
	src, err := streams.OpenSynth("sea?T=300", 1)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	want := map[string]time.Duration{} // "e/ID" or "l/ID" → stamp − clock
	if _, err := backtest.Messages(context.Background(), src, backtest.MessageOptions{Keys: 7, LabelsDelay: 10, Clock: clock}, func(m backtest.Message) error {
		var id struct{ ID string }
		json.Unmarshal(m.Value, &id)
		want[map[bool]string{false: "e/", true: "l/"}[m.Labels]+id.ID] = m.Time.Sub(clock)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	first := events[0].Time
	for _, m := range events {
		if m.Time.Before(first) {
			first = m.Time
		}
	}
	if ahead := time.Until(first); ahead > -50*time.Minute || ahead < -70*time.Minute {
		t.Fatalf("the first event is stamped %s, %s from now: want about an hour back", first, ahead)
	}
	for kind, msgs := range map[string][]kafka.Message{"e/": events, "l/": labels} {
		for _, m := range msgs {
			var id struct{ ID string }
			json.Unmarshal(m.Value, &id)
			if got, w := m.Time.Sub(first), want[kind+id.ID]; got != w {
				t.Fatalf("%s%s stamped %s after the first event, want %s", kind, id.ID, got, w)
			}
		}
	}
}

// A history kept as two JSONL files goes to two topics: each record keyed
// by its line's key (the field taken out of the value) and stamped with its
// "ts" to the millisecond, in file order; a file the merge could not place
// and flags that do not apply are refused.
func TestReplayTwoFiles(t *testing.T) {
	addr := broker(t, "events", "labels")
	dir := t.TempDir()
	ep, lp := filepath.Join(dir, "e.jsonl"), filepath.Join(dir, "l.jsonl")
	os.WriteFile(ep, []byte(`{"key":"ann","id":"1","x":[1,2],"ts":"2026-11-28T10:00:00.0017Z"}
{"key":"bob","id":"2","x":[3,4],"ts":"2026-11-28T10:00:00.0009Z","label":1}
{"key":"ann","id":"3","x":[5,6],"ts":"2026-11-28T10:00:01Z"}
`), 0o644)
	os.WriteFile(lp, []byte(`{"key":"ann","id":"3","label":-1,"ts":"2026-11-28T09:59:59.5Z"}
{"key":"ann","id":"1","label":1,"ts":"2026-11-28T10:00:02.9999Z"}
`), 0o644)
	var errb bytes.Buffer
	if code := run(context.Background(), []string{"replay", "-file", ep, "-labels-data", lp, "-labels-topic", "labels", "-key", "key", "-dim", "2", "-brokers", addr}, &bytes.Buffer{}, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "produced 3 events to events and 2 label records to labels") {
		t.Fatalf("stderr: %s", errb.String())
	}
	got := map[string]string{}
	for _, m := range append(readTopic(t, addr, "events"), readTopic(t, addr, "labels")...) {
		if strings.Contains(string(m.Value), `"key"`) {
			t.Fatalf("the key field stayed in the value: %s", m.Value)
		}
		var id struct{ ID string }
		json.Unmarshal(m.Value, &id)
		got[m.Topic+"/"+id.ID] = string(m.Key) + " " + m.Time.UTC().Format(time.RFC3339Nano)
	}
	want := map[string]string{
		"events/1": "ann 2026-11-28T10:00:00.001Z", "events/2": "bob 2026-11-28T10:00:00Z", "events/3": "ann 2026-11-28T10:00:01Z",
		"labels/3": "ann 2026-11-28T09:59:59.5Z", "labels/1": "ann 2026-11-28T10:00:02.999Z",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records %v\nwant %v", got, want)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-labels-topic", "labels", "-dim", "2"}, exitUsage, "-labels-data needs -key"},
		{[]string{"-labels-topic", "labels", "-key", "key", "-dim", "2", "-labels-delay", "5"}, exitUsage, "-labels-delay and -rate do not apply"},
		{[]string{"-key", "key", "-dim", "2"}, exitUsage, "a -labels-topic other than the events topic"},
	} {
		errb.Reset()
		args := append([]string{"replay", "-file", ep, "-labels-data", lp, "-brokers", addr}, c.args...)
		if code := run(context.Background(), args, &bytes.Buffer{}, &errb); code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, %s; want %d and %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
	os.WriteFile(lp, []byte(`{"key":"ann","id":"3","label":-1}`+"\n"), 0o644)
	errb.Reset()
	if code := run(context.Background(), []string{"replay", "-file", ep, "-labels-data", lp, "-labels-topic", "labels", "-key", "key", "-dim", "2", "-brokers", addr}, &bytes.Buffer{}, &errb); code != exitError || !strings.Contains(errb.String(), `labels file, record 1 (id "3"): no "ts"`) {
		t.Fatalf("a label without ts: exit %d, %s", code, errb.String())
	}
}

func TestReplayFileAndTopic(t *testing.T) {
	addr := broker(t, "events", "copy")
	dir := t.TempDir()
	path := filepath.Join(dir, "d.csv")
	os.WriteFile(path, []byte("who,a,b,class\nann,1,2,UP\nbob,3,4,DOWN\nann,5,6,UP\n"), 0o644)
	var errb bytes.Buffer
	if code := run(context.Background(), []string{"replay", "-file", path, "-header", "-key", "who", "-label", "class", "-positive", "UP", "-brokers", addr}, &bytes.Buffer{}, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	events := readTopic(t, addr, "events")
	if len(events) != 3 {
		t.Fatalf("%d events", len(events))
	}
	for _, m := range events {
		if k := string(m.Key); k != "ann" && k != "bob" {
			t.Fatalf("key %q not from the key column", k)
		}
		if !strings.Contains(string(m.Value), `"label":`) {
			t.Fatalf("inline label missing: %s", m.Value)
		}
	}
	if code := run(context.Background(), []string{"replay", "-from-topic", "events", "-to-topic", "copy", "-speed", "0", "-brokers", addr}, &bytes.Buffer{}, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got := readTopic(t, addr, "copy"); len(got) != 3 {
		t.Fatalf("copied %d records", len(got))
	}
}

func TestProducerUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"bake"}, {"synth"}, {"synth", "-generator", "nope"}, {"replay"}, {"replay", "-file", "x.parquet"}, {"replay", "-from-topic", "a"}} {
		if code := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// murmur2 is Kafka's Java murmur2 (Utils.murmur2), written out here as the
// reference the producer's partitioning is checked against.
func murmur2(data []byte) int32 {
	const m, r = 0x5bd1e995, 24
	h := uint32(0x9747b28c) ^ uint32(len(data))
	n := len(data) / 4 * 4
	for i := 0; i < n; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= m
		k ^= k >> r
		k *= m
		h = h*m ^ k
	}
	switch len(data) % 4 {
	case 3:
		h ^= uint32(data[n+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[n+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[n])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// Each -partitioner puts every key where the client it names would: Java's
// murmur2 (toPositive(murmur2(key)) % n), librdkafka's crc32 (crc32(key) %
// n), and events and their delayed label records of a key together.
func TestPartitionerAgreesWithOtherClients(t *testing.T) {
	want := map[string]func(key []byte) int{
		"murmur2": func(k []byte) int { return int(murmur2(k)&0x7fffffff) % 2 },
		"crc32":   func(k []byte) int { return int(crc32.ChecksumIEEE(k) % 2) },
	}
	for name, part := range want {
		t.Run(name, func(t *testing.T) {
			addr := broker(t, "events")
			var errb bytes.Buffer
			if code := run(context.Background(), []string{"synth", "-generator", "sea?T=400", "-brokers", addr, "-keys", "40", "-labels-delay", "5",
				"-partitioner", name}, &bytes.Buffer{}, &errb); code != exitOK {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			wrong, n := 0, 0
			for p := 0; p < 2; p++ {
				c, err := kafka.DialLeader(context.Background(), "tcp", addr, "events", p)
				if err != nil {
					t.Fatal(err)
				}
				kafkaread.Partition(context.Background(), c, 0, func(m kafka.Message) error {
					n++
					if part(m.Key) != p {
						wrong++
					}
					return nil
				})
				c.Close()
			}
			if n < 400 || wrong != 0 {
				t.Fatalf("%d of %d records in another partition than %s puts them", wrong, n, name)
			}
		})
	}
	if code := run(context.Background(), []string{"synth", "-generator", "sea?T=10", "-partitioner", "random"}, &bytes.Buffer{}, &bytes.Buffer{}); code != exitUsage {
		t.Fatalf("unknown partitioner: exit %d, want %d", code, exitUsage)
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &bytes.Buffer{}); code != exitOK || !strings.Contains(out.String(), "synth|replay") {
		t.Fatalf("producer -h: exit %d, %q", code, out.String())
	}
}

// A topic copied with -from-topic holds its committed records only: those
// of an aborted transaction are not replayed.
func TestReplayTopicCopiesCommittedRecordsOnly(t *testing.T) {
	addr := broker(t, "events", "copy")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("events"), kgo.TransactionalID("upstream"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, commit := range []bool{true, false, true} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 5 {
			v := fmt.Sprintf(`{"id":"t%d-%d","x":[1,2],"label":1}`, i, j)
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte("k"), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(context.Background(), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	var errb bytes.Buffer
	if code := run(context.Background(), []string{"replay", "-from-topic", "events", "-to-topic", "copy", "-speed", "0", "-brokers", addr}, &bytes.Buffer{}, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got := readTopic(t, addr, "copy")
	for _, m := range got {
		if strings.Contains(string(m.Value), `"t1-`) {
			t.Fatalf("an aborted record was copied: %s", m.Value)
		}
	}
	if len(got) != 10 {
		t.Fatalf("copied %d records, want the 10 committed", len(got))
	}
}
