package replay

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// A topic range whose first records retention deletes after the range was
// resolved is an error naming the offsets lost, not a backtest that silently
// starts later.
func TestTopicRangeRefusesDeletedRecords(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", BatchTimeout: time.Millisecond, BatchSize: 1000, RequiredAcks: kafka.RequireAll}
	msgs := make([]kafka.Message, 100)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte("k"), Value: fmt.Appendf(nil, `{"id":"e%d","x":[1,0.5,-1],"label":1}`, i)}
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	in, err := FromTopic(context.Background(), TopicRange{Brokers: []string{addr}, Topic: "events", From: Unbounded, To: Unbounded})
	if err != nil {
		t.Fatal(err)
	}

	kafkatest.DeleteRecords(t, addr, "events", 0, 50)

	col := &collector{preds: map[string][]byte{}}
	_, err = Run(context.Background(), Config{Name: "deleted", Pipeline: pipelineConfig(t, "perceptron", ""), Outputs: col.outputs}, in)
	if err == nil || !strings.Contains(err.Error(), "offsets 0 to 49 of the range were deleted") {
		t.Fatalf("err = %v, want the deleted offsets named", err)
	}
	if len(col.preds) != 0 {
		t.Fatalf("%d predictions from a range missing its start", len(col.preds))
	}
}
