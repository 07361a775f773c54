// Package kafkatest holds what tests against the in-process broker share
// and kafka-go cannot do.
package kafkatest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster starts an in-process broker (one node, with opts), closed when
// the test ends. It refuses, and fails the test for, any request below
// Apache Kafka 4.0.0's minimum version of its API (Kafka40MinVersions): a
// client that would break on Kafka 4 breaks the fast tests too.
func Cluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if min, ok := Kafka40MinVersions[req.Key()]; ok && req.GetVersion() < min {
			err := fmt.Errorf("%s v%d is below Apache Kafka 4.0.0's minimum v%d: a Kafka 4 broker refuses it", kmsg.NameForKey(req.Key()), req.GetVersion(), min)
			t.Error(err)
			return nil, err, true // the connection is closed, as Kafka 4 does
		}
		return nil, nil, false
	})
	return c
}

// Kafka40MinVersions are the lowest versions Apache Kafka 4.0.0 accepts,
// per API key, where above 0: read from a 4.0.0 broker's ApiVersions
// response (scripts/kafka-broker.sh start 4.0.0 …).
var Kafka40MinVersions = map[int16]int16{
	kmsg.Fetch.Int16(): 4, kmsg.ListOffsets.Int16(): 1, kmsg.OffsetCommit.Int16(): 2, kmsg.OffsetFetch.Int16(): 1,
	kmsg.JoinGroup.Int16(): 2, kmsg.CreateTopics.Int16(): 2, kmsg.DeleteTopics.Int16(): 1, kmsg.OffsetForLeaderEpoch.Int16(): 2,
	kmsg.WriteTxnMarkers.Int16(): 1, kmsg.DescribeACLs.Int16(): 1, kmsg.CreateACLs.Int16(): 1, kmsg.DeleteACLs.Int16(): 1,
	kmsg.DescribeConfigs.Int16(): 1, kmsg.AlterReplicaLogDirs.Int16(): 1, kmsg.DescribeLogDirs.Int16(): 1,
	kmsg.CreateDelegationToken.Int16(): 1, kmsg.RenewDelegationToken.Int16(): 1, kmsg.ExpireDelegationToken.Int16(): 1,
	kmsg.DescribeDelegationToken.Int16(): 1,
}

// DeleteRecords deletes the records of topic/partition below offset, as
// retention would (kafka-go has no DeleteRecords call; franz-go's client,
// from the module the in-process broker comes from, sends the request).
func DeleteRecords(t testing.TB, addr, topic string, partition int32, offset int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete records of %s/%d below %d: %v %+v", topic, partition, offset, err, resp)
	}
}

// FetchRefused is the broker's answer to a fetch request that refuses every
// partition it asks for with the error code: what a kfake ControlKey
// function returns to inject a fetch failure.
func FetchRefused(req *kmsg.FetchRequest, code int16) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// ProduceRefused is the broker's answer to a produce request that refuses
// every partition it writes with the error code: what a kfake ControlKey
// function returns to inject a produce failure.
func ProduceRefused(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// TopicExists reports whether the broker has topic, asking in a way that
// never creates it (kafka-go's metadata requests let a broker with
// auto-creation create the topic they ask about).
func TopicExists(t testing.TB, addr, topic string) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	return len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0
}

// Slow skips a test that takes seconds when the suite runs with -short (the
// inner loop); the full suite, go test ./..., and CI run it.
func Slow(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: runs in the full suite (go test ./...), not in the -short inner loop")
	}
}

// RealBroker is the address of the real broker in DRIFTSTREAM_KAFKA_ADDR
// (scripts/kafka-broker.sh starts one; scripts/integration.sh sets it), or
// skips t, saying what of a real broker it needs.
func RealBroker(t testing.TB, needs string) string {
	t.Helper()
	addr := os.Getenv("DRIFTSTREAM_KAFKA_ADDR")
	if addr == "" {
		t.Skipf("needs %s: set DRIFTSTREAM_KAFKA_ADDR (scripts/kafka-broker.sh starts a broker; scripts/integration.sh sets it)", needs)
	}
	return addr
}
