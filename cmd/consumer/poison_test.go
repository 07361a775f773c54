package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
)

// The five records of issue 29 that crash-looped the service, each between
// ordinary events, through the built binary against a broker over TCP with
// Kafka's default 1 MB limit (message.max.bytes = 1,048,588): a record key
// of 600 KB on an event and on a label record (their outputs would carry the
// key twice), and three malformed events of about 1 MB whose errors quoted
// the bad token in full (a long number, an unknown field name, a long ts).
// Each becomes one dead letter with its reason, every other event is
// predicted exactly once, identically to an uninterrupted reference run,
// the process never fails a partition or restarts, and stops cleanly.
func TestBlackBoxPoisonRecordsNeverStopTheStream(t *testing.T) {
	b := newBlackBox(t)
	first := b.start()
	prod := startProducer(t, b.addr, b.topic("events"), 40, 1500, 3000)
	big := strings.Repeat("9", 1_000_000)
	poison := []struct {
		msg    kafka.Message
		reason string
	}{
		{kafka.Message{Key: bytes.Repeat([]byte{'K'}, 600_000), Value: []byte(`{"id":"p1","x":[1,2,3,4,5,6],"label":1}`)}, pipeline.ReasonKeyTooLong},
		{kafka.Message{Key: bytes.Repeat([]byte{'L'}, 600_000), Value: []byte(`{"id":"p2","label":1}`)}, pipeline.ReasonKeyTooLong},
		{kafka.Message{Key: []byte("k1"), Value: []byte(`{"id":"p3","x":[` + big + `e99999]}`)}, pipeline.ReasonInvalidEvent},
		{kafka.Message{Key: []byte("k2"), Value: []byte(`{"id":"p4","` + big + `":1}`)}, pipeline.ReasonInvalidEvent},
		{kafka.Message{Key: []byte("k3"), Value: []byte(`{"id":"p5","ts":"` + big + `","x":[1,2,3,4,5,6]}`)}, pipeline.ReasonInvalidEvent},
	}
	w := &kafka.Writer{Addr: kafka.TCP(b.addr), Topic: b.topic("events"), Balancer: kafka.Murmur2Balancer{}, BatchSize: 1, BatchBytes: pipeline.DefaultMaxMessageBytes,
		RequiredAcks: kafka.RequireAll}
	defer w.Close()
	for _, p := range poison {
		time.Sleep(50 * time.Millisecond)                                // between the producer's events
		if err := writeRetrying(w, []kafka.Message{p.msg}); err != nil { // a real broker may refuse a new topic for a moment
			t.Fatal(err)
		}
	}
	ids := prod.finish(t)
	b.waitPredicted(ids)
	waitFor(t, 30*time.Second, "the dead letters", func() bool { return countAll(readTopic(t, b.addr, b.topic("dead-letters"))) >= len(poison) })
	first.signal(t, syscall.SIGTERM)
	first.waitClean(t)
	if n := first.count("partition failed"); n != 0 {
		t.Fatalf("%d partitions failed:\n%s", n, tail(first.logText(), 3000))
	}
	dups, _ := b.verify(ids)
	reasons := map[string]int{}
	for _, msgs := range readTopic(t, b.addr, b.topic("dead-letters")) {
		for _, m := range msgs {
			h := map[string]string{}
			for _, x := range m.Headers {
				h[x.Key] = string(x.Value)
			}
			reasons[h["reason"]]++
			if len(h["error"]) > pipeline.MaxErrorHeaderBytes || h["offset"] == "" || h["source-topic"] != b.topic("events") {
				t.Errorf("dead letter headers %v", h)
			}
		}
	}
	// A topic backtest over the same topic goes through the five records too.
	out := t.TempDir()
	cmd := exec.Command(b.bin, "backtest", "-brokers", b.addr, "-topic", b.topic("events"), "-dim", "6", "-learners", "lasec-ss",
		"-params", `{"lasec-ss":{"a":0.3}}`, "-out", out, "-q")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("topic backtest: %v\n%s", err, tail(string(msg), 3000))
	}
	summary, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil || !bytes.Contains(summary, []byte(`"dead_letters": 5,`)) || !bytes.Contains(summary, []byte(`"predictions": 1500`)) {
		t.Fatalf("topic backtest summary (%v): %s", err, tail(string(summary), 2000))
	}
	if dups != 0 || len(reasons) != 2 || reasons[pipeline.ReasonKeyTooLong] != 2 || reasons[pipeline.ReasonInvalidEvent] != 3 {
		t.Fatalf("%d duplicate predictions; dead letters by reason %v, want 2 %s and 3 %s", dups, reasons, pipeline.ReasonKeyTooLong, pipeline.ReasonInvalidEvent)
	}
}

func countAll(parts map[int][]kafka.Message) int {
	n := 0
	for _, msgs := range parts {
		n += len(msgs)
	}
	return n
}
