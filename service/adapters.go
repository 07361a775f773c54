package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
)

// sourceBuffer bounds the records fetched ahead of the partition loop.
const sourceBuffer = 256

// kafkaSource reads one partition of the events topic (and of the labels
// topic, when there is one) with kafka-go partition readers: kafka-go's
// group reader cannot start a partition at an offset of our choosing (the
// checkpoint marker), so the group only assigns partitions and the readers
// are positioned by hand.
type kafkaSource struct {
	ch     chan pipeline.Fetched
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// openSource starts the readers of partition p at offsets from.
func (s *Service) openSource(ctx context.Context, p int, from [2]int64) (pipeline.Source, error) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	src := &kafkaSource{ch: make(chan pipeline.Fetched, sourceBuffer), cancel: cancel}
	topics := [2]string{s.cfg.Topics.Events, s.cfg.Topics.Labels}
	var readers []*kafka.Reader
	for i, topic := range topics {
		if topic == "" {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: s.cfg.Brokers, Dialer: s.cfg.Dialer, Topic: topic, Partition: p,
			MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 50 * time.Millisecond})
		if err := r.SetOffset(from[i]); err != nil {
			r.Close()
			for _, r := range readers {
				r.Close()
			}
			cancel()
			return nil, fmt.Errorf("position %s/%d at %d: %w", topic, p, from[i], err)
		}
		readers = append(readers, r)
		src.wg.Add(1)
		go src.read(rctx, r, i, topic, p)
	}
	return src, nil
}

// read forwards one reader's messages; every send, errors included, gives
// way to cancellation, so a stopped partition never leaves a reader blocked.
func (src *kafkaSource) read(ctx context.Context, r *kafka.Reader, topicIdx int, topic string, p int) {
	defer src.wg.Done()
	defer r.Close()
	for {
		m, err := r.FetchMessage(ctx)
		f := pipeline.Fetched{Record: pipeline.Record{Topic: topicIdx, Partition: p, Offset: m.Offset, Key: m.Key, Value: m.Value},
			HighWatermark: m.HighWaterMark}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f = pipeline.Fetched{Err: fmt.Errorf("read %s/%d: %w", topic, p, err)}
		}
		select {
		case src.ch <- f:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

func (src *kafkaSource) Records() <-chan pipeline.Fetched { return src.ch }

func (src *kafkaSource) Close() error {
	src.cancel()
	src.wg.Wait()
	return nil
}

// kafkaSink writes outputs to the output topics, keyed by entity so that a
// key's outputs stay in order on one partition.
type kafkaSink struct {
	writers   map[string]*kafka.Writer
	transport *kafka.Transport
}

func newKafkaSink(cfg Config) *kafkaSink {
	// The writers get a transport of their own, never kafka-go's shared
	// DefaultTransport: its metadata cache (6 s) may predate the topics
	// New just created, and writes to them would fail as unknown topics for
	// seconds (seen as processing stalls in the throughput benchmark).
	transport := cfg.Transport
	if transport == nil {
		transport = &kafka.Transport{}
	}
	s := &kafkaSink{writers: map[string]*kafka.Writer{}, transport: transport}
	for kind, topic := range map[string]string{pipeline.OutPrediction: cfg.Topics.Predictions, pipeline.OutQuery: cfg.Topics.Queries,
		pipeline.OutDeadLetter: cfg.Topics.DeadLetters, pipeline.OutAlert: cfg.Topics.Alerts} {
		if topic == "" {
			continue
		}
		s.writers[kind] = &kafka.Writer{Addr: kafka.TCP(cfg.Brokers...), Topic: topic, Balancer: &kafka.Hash{},
			BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll, Transport: transport}
	}
	return s
}

// Write writes every output, grouped by topic. After a partial failure the
// whole batch is written again by the Runner's retry: outputs are
// at-least-once, and the ones delivered twice are identical.
func (s *kafkaSink) Write(ctx context.Context, outs []pipeline.Output) error {
	byKind := map[string][]kafka.Message{}
	for _, o := range outs {
		m := kafka.Message{Key: o.Key, Value: o.Value}
		for k, v := range o.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: k, Value: []byte(v)})
		}
		byKind[o.Kind] = append(byKind[o.Kind], m)
	}
	for kind, msgs := range byKind {
		w, ok := s.writers[kind]
		if !ok {
			return fmt.Errorf("no topic for outputs of kind %q", kind)
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			return fmt.Errorf("write %d %s outputs to %s: %w", len(msgs), kind, w.Topic, firstWriteError(err))
		}
	}
	return nil
}

func (s *kafkaSink) Close() error {
	var errs []error
	for _, w := range s.writers {
		errs = append(errs, w.Close())
	}
	s.transport.CloseIdleConnections()
	return errors.Join(errs...)
}

// firstWriteError unpacks kafka-go's per-message WriteErrors, which hide
// their causes from errors.As, into the first failure, which the retry
// policy can classify.
func firstWriteError(err error) error {
	var we kafka.WriteErrors
	if !errors.As(err, &we) {
		return err
	}
	for _, e := range we {
		if e != nil {
			return fmt.Errorf("%d of %d messages failed, first: %w", we.Count(), len(we), e)
		}
	}
	return err
}

// groupCommitter commits a partition's offsets in its consumer-group
// generation. kafka-go's CommitOffsets takes no context; it is bounded by
// the coordinator connection's timeouts.
type groupCommitter struct {
	gen       *kafka.Generation
	gctx      context.Context // ends with the generation
	topics    [2]string
	partition int
}

func (c *groupCommitter) Commit(_ context.Context, next [2]int64) error {
	offsets := map[string]map[int]int64{}
	for i, o := range next {
		if o >= 0 && c.topics[i] != "" {
			offsets[c.topics[i]] = map[int]int64{c.partition: o}
		}
	}
	err := c.gen.CommitOffsets(offsets)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kafka.UnknownMemberId), errors.Is(err, kafka.IllegalGeneration), errors.Is(err, kafka.RebalanceInProgress),
		errors.Is(err, kafka.FencedInstanceID), c.gctx.Err() != nil:
		// The generation is over: the marker just written covers these offsets
		// for the next owner.
		return fmt.Errorf("commit partition %d: %w: %v", c.partition, pipeline.ErrLost, err)
	}
	return fmt.Errorf("commit partition %d: %w", c.partition, err)
}
