// Package kafkasource feeds a pipeline.Runner from Kafka: one input topic's
// partition, read off its leader a fetch at a time (kafkaread.Follow) and
// handed over as batches of pipeline.Fetched. The service's live partitions
// and the backtests' topic ranges both read this way.
package kafkasource

import (
	"context"
	"net"

	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
)

// Feed follows the partition cfg names, fetching through rt from the
// cluster at addr, and sends each fetch's records to ch as one batch, as
// records of input topic topicIdx, with their log timestamps. They carry
// hwm as their high watermark when it is positive (a range's end), else the
// end the fetch reported (the last stable offset when reading committed
// records). With idle set, a fetch that returned nothing is sent as one
// Fetched with Idle set (for pipeline.Merge). Every send gives way to ctx,
// so a stopped partition never leaves Feed blocked. It returns what
// kafkaread.Follow returns.
func Feed(ctx context.Context, rt kafka.RoundTripper, addr net.Addr, cfg kafkaread.FollowConfig, topicIdx int, hwm int64, idle bool, ch chan<- []pipeline.Fetched) error {
	p := cfg.Partition
	send := func(batch []pipeline.Fetched) error {
		select {
		case ch <- batch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if idle {
		cfg.Idle = func(next, end int64) error {
			if hwm > 0 {
				end = hwm
			}
			return send([]pipeline.Fetched{{Record: pipeline.Record{Topic: topicIdx, Partition: p, Offset: next}, HighWatermark: end, Idle: true}})
		}
	}
	return kafkaread.Follow(ctx, rt, addr, cfg, func(msgs []kafka.Message, fetched int64) error {
		if hwm > 0 {
			fetched = hwm
		}
		batch := make([]pipeline.Fetched, len(msgs))
		for j, m := range msgs {
			batch[j] = pipeline.Fetched{Record: pipeline.Record{Topic: topicIdx, Partition: p, Offset: m.Offset, Key: m.Key, Value: m.Value,
				Time: m.Time, Trace: trace(m.Headers)}, HighWatermark: fetched}
		}
		return send(batch)
	})
}

// trace is the W3C trace context among a record's headers.
func trace(headers []kafka.Header) pipeline.Trace {
	var t pipeline.Trace
	for _, h := range headers {
		switch h.Key {
		case pipeline.HeaderTraceParent:
			t.Parent = string(h.Value)
		case pipeline.HeaderTraceState:
			t.State = string(h.Value)
		}
	}
	return t
}
