package topics

import (
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go"
)

// The partitioning rule of the topic contract: a key's events, its label
// records and its changelog records share one partition number, so every
// producer of the input topics must hash keys the same way. These are the
// hashes of the common clients, by the name cmd/producer's -partitioner and
// the service's "key not held" answer use.

// Partitioners names the common producer hashes, in the order they are
// documented: murmur2 (Java clients, Kafka Streams, franz-go), crc32
// (librdkafka: kcat, confluent-kafka-python/-go/-dotnet), fnv1a (Sarama,
// kafka-go's Hash).
var Partitioners = []string{"murmur2", "crc32", "fnv1a"}

// DefaultPartitioner is the hash every part of driftstream uses unless told
// otherwise: cmd/producer's -partitioner, the keyed backtests' dealing of a
// file over partitions (so that a file produced to a topic and the same file
// backtested are the same records in the same order), the service's output
// topics and the demo's writer. It is the Java client's, so the outputs are
// co-partitioned with inputs written by Java clients and Kafka Streams.
const DefaultPartitioner = "murmur2"

// Balancer returns the kafka-go balancer of a named partitioner.
func Balancer(name string) (kafka.Balancer, error) {
	switch name {
	case "murmur2":
		return kafka.Murmur2Balancer{}, nil
	case "crc32":
		return kafka.CRC32Balancer{}, nil
	case "fnv1a":
		return &kafka.Hash{}, nil
	}
	return nil, fmt.Errorf("partitioner %q: %s (murmur2 for Java clients, crc32 for librdkafka and kcat, fnv1a for Sarama and kafka-go)", name, strings.Join(Partitioners, ", "))
}

// PartitionOf is key's partition among n under each of Partitioners.
func PartitionOf(key []byte, n int) map[string]int {
	ps := make([]int, n)
	for i := range ps {
		ps[i] = i
	}
	out := make(map[string]int, len(Partitioners))
	for _, name := range Partitioners {
		b, _ := Balancer(name)
		out[name] = b.Balance(kafka.Message{Key: key}, ps...)
	}
	return out
}
