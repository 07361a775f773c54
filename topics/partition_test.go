package topics

import (
	"fmt"
	"testing"

	"github.com/segmentio/kafka-go"
)

// PartitionOf gives, for every named partitioner, the partition its
// kafka-go balancer picks; the three hashes spread keys differently, so a
// producer on the wrong one is caught; an unknown name is an error that
// lists the valid ones.
func TestPartitionOf(t *testing.T) {
	differ := 0
	for i := range 200 {
		key := []byte(fmt.Sprintf("device-%d", i))
		got := PartitionOf(key, 7)
		if len(got) != len(Partitioners) {
			t.Fatalf("%d partitioners, want %d", len(got), len(Partitioners))
		}
		for _, name := range Partitioners {
			b, err := Balancer(name)
			if err != nil {
				t.Fatal(err)
			}
			if want := b.Balance(kafka.Message{Key: key}, 0, 1, 2, 3, 4, 5, 6); got[name] != want || want < 0 || want > 6 {
				t.Fatalf("%s of %s: %d, balancer %d", name, key, got[name], want)
			}
		}
		if got["murmur2"] != got["crc32"] || got["crc32"] != got["fnv1a"] {
			differ++
		}
	}
	if differ < 100 {
		t.Fatalf("the partitioners agree on %d of 200 keys: not three different hashes", 200-differ)
	}
	if _, err := Balancer("random"); err == nil {
		t.Fatal("an unknown partitioner was accepted")
	}
}
