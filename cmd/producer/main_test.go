package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

func broker(t *testing.T, topics ...string) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
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
