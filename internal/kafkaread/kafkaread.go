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

// FollowConfig configures Follow.
type FollowConfig struct {
	// From is the first offset to read.
	From int64
	// End, when positive, is the offset to stop before (a range); otherwise
	// Follow reads what arrives until ctx ends.
	End int64
	// MaxWait bounds how long the broker holds a fetch that has nothing to
	// return (default 50 ms): the longest a new record waits to be read.
	MaxWait time.Duration
	// MaxBatch bounds the records handed to fn at once (default 512).
	MaxBatch int
	// Deleted, when set, is told when records from From on were deleted
	// (retention) before they could be read: reading starts at first.
	Deleted func(from, first int64)
}

// Follow reads the partition behind conn (a connection to its leader) from
// cfg.From on, handing fn each fetch's records in order, in batches of at
// most cfg.MaxBatch, with the partition's high watermark. It reads the
// fetch responses itself, so a record costs no channel operation of its own
// (kafka-go's Reader passes each one over a channel). It returns nil at
// cfg.End, ctx's error when ctx ends (conn is closed then, to cut a waiting
// fetch short), and otherwise the first error of a fetch or of fn; the
// caller decides whether to reconnect. fn owns the batch it is given.
func Follow(ctx context.Context, conn *kafka.Conn, cfg FollowConfig, fn func(batch []kafka.Message, highWatermark int64) error) error {
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 50 * time.Millisecond
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	next := cfg.From
	// seek positions conn at next, or at the first record kept when
	// retention deleted next, telling cfg.Deleted.
	seek := func() error {
		first, _, err := conn.ReadOffsets()
		if err != nil {
			return orCtx(ctx, fmt.Errorf("offsets: %w", err))
		}
		if next < first {
			if cfg.Deleted != nil {
				cfg.Deleted(next, first)
			}
			next = first
		}
		if _, err := conn.Seek(next, kafka.SeekAbsolute); err != nil {
			return orCtx(ctx, fmt.Errorf("seek %d: %w", next, err))
		}
		return nil
	}
	if err := seek(); err != nil {
		return err
	}
	for cfg.End <= 0 || next < cfg.End {
		if err := ctx.Err(); err != nil {
			return err
		}
		conn.SetReadDeadline(time.Now().Add(cfg.MaxWait + 30*time.Second))
		b := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 16 << 20, MaxWait: cfg.MaxWait})
		hwm := b.HighWaterMark()
		var out []kafka.Message
		var ferr error
		for cfg.End <= 0 || next < cfg.End {
			m, err := b.ReadMessage()
			if err != nil {
				break
			}
			if cfg.End > 0 && m.Offset >= cfg.End { // past a gap (compaction) at the end of the range
				next = cfg.End
				break
			}
			next = m.Offset + 1
			if out == nil {
				out = make([]kafka.Message, 0, cfg.MaxBatch)
			}
			out = append(out, m)
			if len(out) == cfg.MaxBatch {
				if ferr = fn(out, hwm); ferr != nil {
					break
				}
				out = nil
			}
		}
		if len(out) > 0 && ferr == nil {
			ferr = fn(out, hwm)
		}
		if err := b.Close(); err != nil && ferr == nil {
			if errors.Is(err, kafka.RequestTimedOut) && ctx.Err() == nil {
				continue // kafka-go's word for a fetch that found nothing new within MaxWait
			}
			if errors.Is(err, kafka.OffsetOutOfRange) && ctx.Err() == nil { // deleted while we read?
				if first, _, oerr := conn.ReadOffsets(); oerr == nil && next < first {
					if err := seek(); err != nil {
						return err
					}
					continue
				}
			}
			return orCtx(ctx, fmt.Errorf("read at offset %d: %w", next, err))
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
