package backtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/pipeline/kafkasource"
	"github.com/segmentio/kafka-go"
)

// Bound is one end of a topic range: an offset, a time, or neither (the
// partition's first offset for a start, its end when the replay starts for
// an end).
type Bound struct {
	Offset int64 // used when Time is zero and Offset ≥ 0
	Time   time.Time
}

// Unbounded is the open end of a range.
var Unbounded = Bound{Offset: -1}

// ParseBound reads a bound: "" (open), an offset, or an RFC 3339 time.
func ParseBound(s string) (Bound, error) {
	if s == "" {
		return Unbounded, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return Bound{}, fmt.Errorf("offset %d: must be ≥ 0", n)
		}
		return Bound{Offset: n}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Bound{}, fmt.Errorf("%q is neither an offset nor an RFC 3339 time (2026-11-20T00:00:00Z)", s)
	}
	return Bound{Offset: -1, Time: t}, nil
}

// TopicRange names what a topic backtest reads.
type TopicRange struct {
	Brokers []string
	Dialer  *kafka.Dialer
	// Transport carries the fetches (nil: a plain one); Isolation is what
	// is read of transactional records (default read_committed, as the
	// service: the range ends at each partition's last stable offset).
	Transport *kafka.Transport
	Isolation kafkaread.Isolation
	// Topic is the events topic; LabelsTopic an optional co-partitioned
	// labels topic.
	Topic, LabelsTopic string
	// From and To bound the events topic per partition (To exclusive). Times
	// bound the labels topic too; offsets bound the events topic only, the
	// labels topic being read from its start to its end.
	From, To Bound
}

// span is one partition's offsets to read from one topic: [start, end).
type span struct{ start, end int64 }

// topicInput reads every partition of a topic range with partition readers:
// no consumer group is joined and nothing is committed, so a backtest can
// run beside the live service on its own history.
type topicInput struct {
	rng   TopicRange
	parts []int
	spans map[int][2]span // per partition, per input topic
	total int64
	// peers reads each partition the other partitions' inputs too (a
	// shared part across partitions: readPeers).
	peers bool
}

// FromTopic resolves the range's offsets in every partition, once: records
// that arrive later are not part of the replay.
func FromTopic(ctx context.Context, rng TopicRange) (Input, error) {
	if len(rng.Brokers) == 0 || rng.Topic == "" {
		return nil, errors.New("a topic backtest needs brokers and a topic")
	}
	if rng.Dialer == nil {
		rng.Dialer = &kafka.Dialer{Timeout: 10 * time.Second}
	}
	if rng.Transport == nil {
		rng.Transport = &kafka.Transport{}
	}
	in := &topicInput{rng: rng, spans: map[int][2]span{}}
	evParts, err := in.resolve(ctx, rng.Topic, rng.From, rng.To)
	if err != nil {
		return nil, err
	}
	var lbParts map[int]span
	if rng.LabelsTopic != "" {
		from, to := Unbounded, Unbounded
		if !rng.From.Time.IsZero() {
			from = rng.From
		}
		if !rng.To.Time.IsZero() {
			to = rng.To
		}
		if lbParts, err = in.resolve(ctx, rng.LabelsTopic, from, to); err != nil {
			return nil, err
		}
		if len(lbParts) != len(evParts) {
			return nil, fmt.Errorf("topic %s has %d partitions but %s has %d: they must be co-partitioned", rng.LabelsTopic, len(lbParts), rng.Topic, len(evParts))
		}
	}
	for p, s := range evParts {
		in.parts = append(in.parts, p)
		sp := [2]span{s, {}}
		if l, ok := lbParts[p]; ok {
			sp[1] = l
		}
		in.spans[p] = sp
		in.total += (sp[0].end - sp[0].start) + (sp[1].end - sp[1].start)
	}
	slices.Sort(in.parts)
	return in, nil
}

// resolve turns bounds into offsets in every partition of topic.
func (in *topicInput) resolve(ctx context.Context, topic string, from, to Bound) (map[int]span, error) {
	conn, err := dialAny(ctx, in.rng.Dialer, in.rng.Brokers)
	if err != nil {
		return nil, err
	}
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	if err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	out := map[int]span{}
	for _, pt := range parts {
		lc, err := in.rng.Dialer.DialLeader(ctx, "tcp", kafkaAddr(pt.Leader), topic, pt.ID)
		if err != nil {
			return nil, fmt.Errorf("topic %s partition %d: %w", topic, pt.ID, err)
		}
		first, last, err := lc.ReadOffsets()
		if err == nil && in.rng.Isolation == kafkaread.ReadCommitted {
			var stable int64 // records past an open transaction are not part of the range
			if stable, err = kafkaread.StableOffset(ctx, in.rng.Transport, kafka.TCP(in.rng.Brokers...), topic, pt.ID); err == nil {
				last = min(last, stable)
			}
		}
		if err != nil {
			lc.Close()
			return nil, fmt.Errorf("topic %s partition %d: %w", topic, pt.ID, err)
		}
		at := func(b Bound, open int64) (int64, error) {
			switch {
			case !b.Time.IsZero():
				return lc.ReadOffset(b.Time)
			case b.Offset >= 0:
				return min(max(b.Offset, first), last), nil
			}
			return open, nil
		}
		s, err := at(from, first)
		if err == nil {
			var e int64
			e, err = at(to, last)
			s, e = max(s, first), min(e, last)
			out[pt.ID] = span{start: s, end: max(s, e)}
		}
		lc.Close()
		if err != nil {
			return nil, fmt.Errorf("topic %s partition %d: resolve the range: %w", topic, pt.ID, err)
		}
	}
	return out, nil
}

func (in *topicInput) Partitions() []int { return in.parts }
func (in *topicInput) Total() int64      { return in.total }
func (in *topicInput) Err() error        { return nil }

// Open reads partition p from max(from, the range start) to the range end
// on each input topic; with readPeers, the other partitions' too.
func (in *topicInput) Open(ctx context.Context, p int, start pipeline.From) (pipeline.Source, error) {
	if _, ok := in.spans[p]; !ok {
		return nil, fmt.Errorf("partition %d is not in the range", p)
	}
	topics := [2]string{in.rng.Topic, in.rng.LabelsTopic}
	var peers []int
	if in.peers {
		peers = in.parts
	}
	inputs := start.Inputs(p, topics[pipeline.LabelsTopic] != "", peers) // the service's order
	for k, n := range inputs {
		inputs[k].From = max(n.From, in.spans[n.Partition][n.Topic].start)
	}
	rctx, cancel := context.WithCancel(ctx)
	src := &chanSource{ch: make(chan []pipeline.Fetched, 8)}
	var wg sync.WaitGroup
	// With more than one input, they meet in the service's order:
	// pipeline.Merge by record timestamp, waiting for each as long as it
	// has records left in the range (a bounded input never makes the merge
	// go on without it).
	merged := len(inputs) > 1
	chans := make([]<-chan []pipeline.Fetched, len(inputs))
	from := make([]int64, len(inputs))
	for k, n := range inputs {
		ch := src.ch
		if merged {
			c := make(chan []pipeline.Fetched, 8)
			ch, chans[k], from[k] = c, c, n.From
		}
		end := in.spans[n.Partition][n.Topic].end
		if n.From >= end {
			if merged {
				close(ch) // nothing of it in the range
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if merged {
				defer close(ch)
			}
			topic := topics[n.Topic]
			err := in.read(rctx, ch, n.Topic, topic, n.Partition, n.From, end)
			if err == nil || rctx.Err() != nil {
				return
			}
			select { // the Runner retries it when pipeline.IsRetriable
			case ch <- []pipeline.Fetched{{Err: fmt.Errorf("read %s/%d: %w", topic, n.Partition, err)}}:
			case <-rctx.Done():
			}
		}()
	}
	closed := make(chan struct{})
	if merged {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pipeline.Merge(rctx, chans, from, -1, 512, src.ch, nil)
		}()
		go func() { wg.Wait(); close(closed) }()
	} else {
		go func() { wg.Wait(); close(src.ch); close(closed) }()
	}
	src.close = func() { cancel(); <-closed }
	return src, nil
}

// readPeers has every partition read the other partitions' input topics
// too (peerReader).
func (in *topicInput) readPeers() error {
	in.peers = true
	return nil
}

// read hands ch the records of topic/p from start up to end, in the
// batches its fetches return. Records deleted (retention) before they were
// read are an error: a backtest does not skip part of its range.
func (in *topicInput) read(ctx context.Context, ch chan<- []pipeline.Fetched, topicIdx int, topic string, p int, start, end int64) error {
	// A deletion is found before anything is read: stop there.
	deleted := func(from, first int64) error {
		return fmt.Errorf("offsets %d to %d of the range were deleted (retention) before the replay read them", from, first-1)
	}
	cfg := kafkaread.FollowConfig{Topic: topic, Partition: p, From: start, End: end, Isolation: in.rng.Isolation, Deleted: deleted}
	return kafkasource.Feed(ctx, in.rng.Transport, kafka.TCP(in.rng.Brokers...), cfg, topicIdx, end, false, ch)
}

func dialAny(ctx context.Context, d *kafka.Dialer, brokers []string) (*kafka.Conn, error) {
	var errs []error
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("connect to %s: %w", b, err))
	}
	return nil, errors.Join(errs...)
}

func kafkaAddr(b kafka.Broker) string { return fmt.Sprintf("%s:%d", b.Host, b.Port) }
