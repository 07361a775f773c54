package main

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
)

// With the shipped population model, a changelog key record that cannot be
// used (here: garbled) makes the restore inexact, and the partition is
// rebuilt from its input topics' first records: counted in
// driftstream_partitions_rebuilt_total, every event predicted, no partition
// failed. When retention deleted records of that partition's events topic,
// the rebuild cannot be exact, and the partition fails, saying why.
func TestBlackBoxInexactRestoreRebuilds(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		t.Run(fmt.Sprintf("input-deleted-%v", deleted), func(t *testing.T) {
			b := newBlackBox(t)
			i := slices.Index(b.args, "-learner") // the shipped learner configuration
			b.args = slices.Delete(b.args, i, i+4)
			const n = 300
			var evs []kafka.Message
			var ids []string
			for i := range n {
				id := fmt.Sprintf("e%d", i)
				ids = append(ids, id)
				evs = append(evs, kafka.Message{Key: fmt.Appendf(nil, "k%d", i%20),
					Value: fmt.Appendf(nil, `{"id":%q,"x":[%d,1,-1,0.5,0,%d],"label":%d}`, id, i%5-2, i%3-1, 1-2*(i%2))})
			}
			b.runToEnd(evs, ids)

			// k3's record garbled (a record after its last, under its key, on its partition).
			kafkatest.Write(t, b.addr, b.topic("changelog"), []kafka.Message{{Key: []byte("k3"), Value: []byte("not a checkpoint record")}})
			var part int
			for p, msgs := range readTopic(t, b.addr, b.topic("events")) {
				if slices.ContainsFunc(msgs, func(m kafka.Message) bool { return string(m.Key) == "k3" }) {
					part = p
					if deleted {
						kafkatest.DeleteRecords(t, b.addr, b.topic("events"), int32(p), msgs[len(msgs)/2].Offset)
					}
				}
			}
			metricsAddr := freeAddr(t)
			b.args = append(b.args, "-metrics-addr", metricsAddr)
			second := b.start()
			if deleted {
				waitFor(t, 60*time.Second, "the partition's failure", func() bool {
					return second.count("before the partition's rebuild read them") > 0
				})
				if got := metric(metricsAddr, "driftstream_partitions_rebuilt_total"); got != 1 {
					t.Fatalf("%d partitions rebuilt, want 1 (partition %d, which then failed)", got, part)
				}
				return
			}
			waitFor(t, 60*time.Second, "the rebuilt partition's checkpoint", func() bool {
				return metric(metricsAddr, "driftstream_partitions_rebuilt_total") == 1 && second.count(`"from":"inputs"`) == 1
			})
			second.signal(t, syscall.SIGTERM)
			if err := <-second.done; err != nil {
				t.Fatalf("the rebuilding member exited with %v", err)
			}
			if second.count(`"level":"ERROR"`) != 0 || second.count(`"level":"WARN","msg":"the changelog cannot restore the partition exactly`) != 1 {
				t.Fatalf("want one WARN saying the partition is rebuilt, and no ERROR; the log:\n%s", second.logText())
			}
		})
	}
}
