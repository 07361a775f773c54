// Package kafkaread reads one Kafka partition from an offset up to the end it
// has when the read starts: what restoring a changelog, copying a topic and
// checking a topic in tests all need.
package kafkaread

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Partition calls fn for every record of the partition behind conn (a
// connection to its leader) from offset from (clamped to the first retained
// offset) up to the last offset at the time of the call, in order. It stops
// at the first error fn returns.
func Partition(ctx context.Context, conn *kafka.Conn, from int64, fn func(kafka.Message) error) error {
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return fmt.Errorf("offsets: %w", err)
	}
	return Range(ctx, conn, max(from, first), last, fn)
}

// Range calls fn for every record of the partition behind conn from offset
// next up to (not including) last, in order (none past last, also where
// compaction removed the records just before it), for a caller that has read the
// partition's offsets itself (conn.ReadOffsets). It stops at the first error
// fn returns.
func Range(ctx context.Context, conn *kafka.Conn, next, last int64, fn func(kafka.Message) error) error {
	if next >= last {
		return nil
	}
	if _, err := conn.Seek(next, kafka.SeekAbsolute); err != nil {
		return fmt.Errorf("seek %d: %w", next, err)
	}
	for next < last {
		if err := ctx.Err(); err != nil {
			return err
		}
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		batch := conn.ReadBatch(1, 16<<20)
		var ferr error
		for next < last {
			m, err := batch.ReadMessage()
			if err != nil {
				break
			}
			if m.Offset >= last { // compaction left a gap up to last: the range is done
				next = last
				break
			}
			next = m.Offset + 1
			if ferr = fn(m); ferr != nil {
				break
			}
		}
		if err := batch.Close(); err != nil && ferr == nil {
			return fmt.Errorf("read at offset %d: %w", next, err)
		}
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// orCtx prefers ctx's error: a read cut short by closing the connection
// reports a closed connection, which is the stop, not a failure.
func orCtx(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Leader connects to the leader of topic/partition through the first of
// brokers that answers.
func Leader(ctx context.Context, d *kafka.Dialer, brokers []string, topic string, partition int) (*kafka.Conn, error) {
	var errs []error
	for _, b := range brokers {
		c, err := d.DialLeader(ctx, "tcp", b, topic, partition)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("connect to the leader of %s/%d: %w", topic, partition, errors.Join(errs...))
}
