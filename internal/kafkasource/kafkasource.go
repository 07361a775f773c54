// Package kafkasource feeds a pipeline.Runner from Kafka: one input topic's
// partition, read off its leader a fetch at a time (kafkaread.Follow) and
// handed over as batches of pipeline.Fetched. The service's live partitions
// and the backtests' topic ranges both read this way.
package kafkasource

import (
	"context"

	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
)

// Feed follows the partition behind conn (its leader) as cfg says, and sends
// each fetch's records to ch as one batch, as records of input topic
// topicIdx and partition p. They carry hwm as their high watermark when it
// is positive (a range's end), else the fetch's. Every send gives way to
// ctx, so a stopped partition never leaves Feed blocked. It returns what
// kafkaread.Follow returns.
func Feed(ctx context.Context, conn *kafka.Conn, cfg kafkaread.FollowConfig, topicIdx, p int, hwm int64, ch chan<- []pipeline.Fetched) error {
	return kafkaread.Follow(ctx, conn, cfg, func(msgs []kafka.Message, fetched int64) error {
		if hwm > 0 {
			fetched = hwm
		}
		batch := make([]pipeline.Fetched, len(msgs))
		for j, m := range msgs {
			batch[j] = pipeline.Fetched{Record: pipeline.Record{Topic: topicIdx, Partition: p, Offset: m.Offset, Key: m.Key, Value: m.Value},
				HighWatermark: fetched}
		}
		select {
		case ch <- batch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}
