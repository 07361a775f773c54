package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
)

// thirdPartyEvents writes n events of producer name over 30 keys, each
// event followed three records later by its label record (a delayed label,
// same key): as "key|value" lines for kcat and Python, and as JSONL with a
// "key" field for cmd/producer (which sends the labels itself). It returns
// the event ids.
func thirdPartyEvents(t *testing.T, dir, name string, n int) (lines, jsonl string, ids []string) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(len(name)), 5))
	var kv, jl strings.Builder
	type pending struct{ key, value string }
	var late []pending
	for i := range n {
		key := fmt.Sprintf("%s-k%d", name, r.IntN(30))
		x, y := labeledPoint(r)
		id := fmt.Sprintf("%s-e%d", name, i)
		ids = append(ids, id)
		xs, _ := json.Marshal(x)
		fmt.Fprintf(&kv, "%s|{\"id\":%q,\"x\":%s}\n", key, id, xs)
		late = append(late, pending{key, fmt.Sprintf(`{"id":%q,"label":%d}`, id, y)})
		if len(late) > 3 {
			fmt.Fprintf(&kv, "%s|%s\n", late[0].key, late[0].value)
			late = late[1:]
		}
		fmt.Fprintf(&jl, "{\"id\":%q,\"key\":%q,\"x\":%s,\"label\":%d}\n", id, key, xs, y)
	}
	for _, l := range late {
		fmt.Fprintf(&kv, "%s|%s\n", l.key, l.value)
	}
	lines, jsonl = filepath.Join(dir, name+".kv"), filepath.Join(dir, name+".jsonl")
	if err := os.WriteFile(lines, []byte(kv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jsonl, []byte(jl.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return lines, jsonl, ids
}

// confluentProducer is a Python confluent-kafka (librdkafka) producer of
// "key|value" lines, with the partitioner given ("" for its default).
const confluentProducer = `
import sys
from confluent_kafka import Producer
addr, topic, path, partitioner = sys.argv[1:5]
conf = {"bootstrap.servers": addr, "enable.idempotence": True}
if partitioner:
    conf["partitioner"] = partitioner
p = Producer(conf)
for line in open(path):
    key, value = line.rstrip("\n").split("|", 1)
    p.produce(topic, key=key.encode(), value=value.encode())
    p.poll(0)
left = p.flush(30)
if left:
    sys.exit("%d records not delivered" % left)
`

// Events and delayed label records produced by clients nobody here wrote —
// kcat and Python's confluent-kafka (both librdkafka), each with its
// default partitioner and with murmur2_random — and by cmd/producer with
// each of its partitioners, onto one events topic of a real broker. Each
// client's key → partition mapping is the one cmd/producer's -partitioner
// of the same name computes (librdkafka's default is crc32), so labels
// meet their events; the consumer then predicts every event once,
// byte-identical to an uninterrupted run, with identical final key states.
// Runs in the integration suite (scripts/integration.sh), which has kcat
// and confluent-kafka installed by .ci/run.
func TestRealKafkaThirdPartyProducers(t *testing.T) {
	kafkatest.RealBroker(t, "a real broker for the third-party producers")
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatalf("kcat is needed (apt-get install kcat; .ci/run installs it): %v", err)
	}
	if out, err := exec.Command("python3", "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		t.Fatalf("Python's confluent-kafka is needed (pip install confluent-kafka; .ci/run installs it): %v\n%s", err, out)
	}
	b := newBlackBox(t)
	producer := filepath.Join(b.dir, "producer")
	if out, err := exec.Command("go", "build", "-o", producer, "../producer").CombinedOutput(); err != nil {
		t.Fatalf("build the producer: %v\n%s", err, out)
	}
	events := b.topic("events")
	const n = 400
	type client struct {
		name, partitioner string // partitioner: the cmd/producer name of its mapping
		run               func(lines, jsonl string) *exec.Cmd
	}
	clients := []client{
		{"kcat", "crc32", func(lines, _ string) *exec.Cmd {
			return exec.Command("kcat", "-P", "-b", b.addr, "-t", events, "-K", "|", "-l", lines)
		}},
		{"kcat-murmur2", "murmur2", func(lines, _ string) *exec.Cmd {
			return exec.Command("kcat", "-P", "-b", b.addr, "-t", events, "-K", "|", "-X", "partitioner=murmur2_random", "-l", lines)
		}},
		{"confluent", "crc32", func(lines, _ string) *exec.Cmd {
			return exec.Command("python3", "-c", confluentProducer, b.addr, events, lines, "")
		}},
		{"confluent-murmur2", "murmur2", func(lines, _ string) *exec.Cmd {
			return exec.Command("python3", "-c", confluentProducer, b.addr, events, lines, "murmur2_random")
		}},
	}
	for _, p := range topics.Partitioners {
		clients = append(clients, client{"producer-" + p, p, func(_, jsonl string) *exec.Cmd {
			return exec.Command(producer, "replay", "-file", jsonl, "-key", "key", "-dim", "6", "-labels-delay", "3",
				"-partitioner", p, "-brokers", b.addr, "-topic", events)
		}})
	}
	var ids []string
	for _, c := range clients {
		lines, jsonl, cids := thirdPartyEvents(t, b.dir, c.name, n)
		if out, err := c.run(lines, jsonl).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, out)
		}
		ids = append(ids, cids...)
	}
	// Every record of each client sits where its partitioner's namesake
	// in cmd/producer puts it.
	records, misplaced := map[string]int{}, map[string]int{}
	for p, msgs := range readTopic(t, b.addr, events) {
		for _, m := range msgs {
			name := string(m.Key[:strings.LastIndex(string(m.Key), "-k")])
			for _, c := range clients {
				if c.name == name {
					records[name]++
					if topics.PartitionOf(m.Key, blackBoxPartitions)[c.partitioner] != p {
						misplaced[name]++
					}
				}
			}
		}
	}
	for _, c := range clients {
		t.Logf("%s: %d records (events and label records), %d not where %s puts them", c.name, records[c.name], misplaced[c.name], c.partitioner)
		if records[c.name] != 2*n || misplaced[c.name] != 0 {
			t.Errorf("%s: %d records, want %d; %d misplaced for %s", c.name, records[c.name], 2*n, misplaced[c.name], c.partitioner)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	b.finishWith(ids)
	if dups, _ := b.verify(ids); dups != 0 {
		t.Fatalf("%d predictions repeated by one clean run", dups)
	}
	last := b.finishers[0]
	if joined := last.count(`"LabelsJoined":0`); joined != 0 {
		t.Fatalf("no delayed label was joined:\n%s", tail(last.logText(), 2000))
	}
}

// A topic backtest over a range of the broker's topic (a real one in the
// integration suite), given by offsets and by record times (the broker's
// ListOffsets by timestamp): it reads
// exactly the events whose offsets, or whose times, fall in the range, in
// every partition.
func TestBlackBoxTopicBacktestRange(t *testing.T) {
	b := newBlackBox(t)
	events := b.topic("events")
	// Recent times: a real broker's retention (7 days by default, checked
	// every second by scripts/kafka-broker.sh) deletes older records at once.
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	w := &kafka.Writer{Addr: kafka.TCP(b.addr), Topic: events, Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	var msgs []kafka.Message
	for i := range 900 {
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%d", i%40), Time: base.Add(time.Duration(i) * time.Second),
			Value: fmt.Appendf(nil, `{"id":"e%d","x":[%d,1,0,0,0,0],"label":%d}`, i, i%7-3, 1-2*(i%2))})
	}
	if err := writeRetrying(w, msgs); err != nil {
		t.Fatal(err)
	}
	stored := readTopic(t, b.addr, events)
	backtest := func(from, to string) float64 {
		t.Helper()
		out := t.TempDir()
		cmd := exec.Command(b.bin, "backtest", "-brokers", b.addr, "-topic", events, "-dim", "6", "-learners", "perceptron",
			"-from", from, "-to", to, "-out", out, "-q")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("backtest -from %s -to %s: %v\n%s", from, to, err, tail(string(msg), 3000))
		}
		raw, err := os.ReadFile(filepath.Join(out, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		var reps []struct{ Totals struct{ Events float64 } }
		if err := json.Unmarshal(raw, &reps); err != nil || len(reps) != 1 {
			t.Fatalf("summary.json (%v): %s", err, raw)
		}
		return reps[0].Totals.Events
	}
	for _, tc := range []struct {
		from, to string
		in       func(m kafka.Message) bool
	}{
		{"10", "200", func(m kafka.Message) bool { return m.Offset >= 10 && m.Offset < 200 }},
		{base.Add(250 * time.Second).Format(time.RFC3339), base.Add(700 * time.Second).Format(time.RFC3339), func(m kafka.Message) bool {
			return !m.Time.Before(base.Add(250*time.Second)) && m.Time.Before(base.Add(700*time.Second))
		}},
		{"0", base.Add(100 * time.Second).Format(time.RFC3339), func(m kafka.Message) bool { return m.Time.Before(base.Add(100 * time.Second)) }},
	} {
		want := 0
		for _, ms := range stored {
			for _, m := range ms {
				if tc.in(m) {
					want++
				}
			}
		}
		if got := backtest(tc.from, tc.to); got != float64(want) || want == 0 {
			t.Errorf("-from %s -to %s: %v events backtested, the topic holds %d in the range", tc.from, tc.to, got, want)
		} else {
			t.Logf("-from %s -to %s: %d events, as the topic holds", tc.from, tc.to, want)
		}
	}
}
