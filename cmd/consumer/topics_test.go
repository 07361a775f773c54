package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
)

// partitionsOf is topic's partition count (0 when it does not exist).
func partitionsOf(t *testing.T, addr, topic string) int {
	t.Helper()
	if !kafkatest.TopicExists(t, addr, topic) {
		return 0
	}
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ps, err := conn.ReadPartitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	return len(ps)
}

// withArg returns args with flag's value replaced (or added).
func withArg(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == flag {
			out[i+1] = value
			return out
		}
	}
	return append(out, flag, value)
}

// An events topic of 5 partitions, on a broker, with the default
// -partitions (0): the service creates its topics with 5 partitions. With
// -partitions 3 it refuses to start, naming the setting, before it creates
// any topic.
func TestBlackBoxTakesTheEventsTopicsPartitionCount(t *testing.T) {
	b := newBlackBox(t)
	events := b.topic("events5")
	kafkatest.CreateTopic(t, b.addr, kafka.TopicConfig{Topic: events, NumPartitions: 5, ReplicationFactor: 1})
	b.args = withArg(b.args, "-events-topic", events)
	refused := b.start() // -partitions 3, as the harness sets
	refused.failsSaying(t, 60*time.Second, "a start with -partitions 3", "DRIFTSTREAM_PARTITIONS=3, but the events topic "+events+" already has 5 partitions")
	for _, name := range []string{"predictions", "changelog"} {
		if n := partitionsOf(t, b.addr, b.topic(name)); n != 0 {
			t.Fatalf("topic %s was created (%d partitions) by a start that was refused", b.topic(name), n)
		}
	}
	b.args = withArg(b.args, "-partitions", "0")
	ok := b.start()
	waitFor(t, 60*time.Second, "the service running", func() bool { return ok.count(`"partition restored"`) >= 5 })
	for _, name := range []string{"predictions", "label-queries", "dead-letters", "drift-alerts", "changelog"} {
		if n := partitionsOf(t, b.addr, b.topic(name)); n != 5 {
			t.Errorf("topic %s has %d partitions, want the events topic's 5", b.topic(name), n)
		}
	}
	ok.kill(t)
}

// Partitions added to the events topic while the consumer runs are
// reported: an error naming the topic and both counts, within a few
// topic checks; then a restart refuses to start, naming the changelog.
func TestBlackBoxReportsAGrownEventsTopic(t *testing.T) {
	b := newBlackBox(t)
	b.args = append(b.args, "-topic-check-interval", "500ms")
	a := b.start()
	waitFor(t, 60*time.Second, "the partitions restored", func() bool { return a.count(`"partition restored"`) >= blackBoxPartitions })
	client := &kafka.Client{Addr: kafka.TCP(b.addr)}
	res, err := client.CreatePartitions(context.Background(), &kafka.CreatePartitionsRequest{
		Topics: []kafka.TopicPartitionsConfig{{Name: b.topic("events"), Count: blackBoxPartitions + 2}}})
	if err != nil || res.Errors[b.topic("events")] != nil {
		t.Fatalf("grow the events topic: %v %v", err, res)
	}
	waitFor(t, 60*time.Second, "the grown topic reported", func() bool { return a.count(`"input partitions not served"`) > 0 })
	if line := a.logLines(2000, "input partitions not served"); !strings.Contains(line, "has 5 partitions, the service started with 3") || !strings.Contains(line, `"unread_partitions":2`) {
		t.Fatalf("the report does not say which partitions: %s", line)
	}
	a.kill(t)
	b.args = withArg(b.args, "-partitions", "0") // take the count from the events topic
	again := b.start()
	again.failsSaying(t, 60*time.Second, "a restart on the grown topic", "the changelog topic "+b.topic("changelog")+" has 3 partitions")
}
