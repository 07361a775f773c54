// Package kafkaread reads one Kafka partition from an offset up to the end it
// has when the read starts: what restoring a changelog, copying a topic and
// checking a topic in tests all need.
package kafkaread

import (
	"context"
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
	next := max(from, first)
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
