package kafkatest

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// CreateTopic creates a topic through the cluster's controller and waits
// until it has leaders for all its partitions (a real broker refuses a topic
// it has just created for a moment).
func CreateTopic(t testing.TB, addr string, tc kafka.TopicConfig) {
	t.Helper()
	withController(t, addr, func(c *kafka.Conn) error { return c.CreateTopics(tc) })
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if ps, err := conn.ReadPartitions(tc.Topic); err == nil && len(ps) == tc.NumPartitions {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s: no leaders for its %d partitions after 30 s", tc.Topic, tc.NumPartitions)
		}
	}
}

// DeleteTopic deletes a topic through the cluster's controller and waits
// until the broker no longer has it.
func DeleteTopic(t testing.TB, addr, topic string) {
	t.Helper()
	withController(t, addr, func(c *kafka.Conn) error { return c.DeleteTopics(topic) })
	for deadline := time.Now().Add(30 * time.Second); TopicExists(t, addr, topic); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("topic %s still there 30 s after its deletion", topic)
		}
	}
}

// withController runs fn on a connection to the controller of the cluster
// at addr (topic administration goes there).
func withController(t testing.TB, addr string, fn func(*kafka.Conn) error) {
	t.Helper()
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctrl, err := conn.Controller()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := kafka.Dial("tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if err := fn(cc); err != nil {
		t.Fatal(err)
	}
}

// Write writes msgs to topic in order, as a keyed producer does: murmur2
// over the record key (the service's and the Java clients' partitioner),
// every replica acknowledging, each message's Time as its record
// timestamp. A refused write is tried again for up to 30 s: a real broker
// refuses a topic it has just created for a moment.
func Write(t testing.TB, addr, topic string, msgs []kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, BatchSize: 5000,
		RequiredAcks: kafka.RequireAll}
	defer w.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := w.WriteMessages(context.Background(), msgs...)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("write %d records to %s: %v", len(msgs), topic, err)
		}
	}
}
