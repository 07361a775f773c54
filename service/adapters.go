package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/pipeline/kafkasource"
	"github.com/segmentio/kafka-go"
)

// sourceBuffer bounds the batches fetched ahead of the partition loop.
const sourceBuffer = 8

// kafkaSource reads one partition of the events topic (and of the labels
// topic, when there is one) over a connection to the partition's leader,
// handing the Runner each fetch's records as one batch
// (kafkaread.Follow). kafka-go's group reader cannot start a partition at an
// offset of our choosing (the checkpoint marker), so the group only assigns
// partitions; and its partition Reader passes every record over a channel
// of its own, which cost a fifth of the service's CPU in the throughput
// benchmark, so the source reads the fetch responses itself. A failed read
// is reported to the Runner, which backs off and reopens the source after
// the last record it processed: the reconnection the Reader did inside.
type kafkaSource struct {
	ch     chan []pipeline.Fetched
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// openSource starts the readers of partition p at start. With a labels
// topic, or a shared part across partitions (which also reads every other
// partition of the input topics), each input's reader feeds a channel of
// its own and pipeline.Merge interleaves them by record timestamp, so that
// the order the partition's records meet in is a function of the logs.
func (s *Service) openSource(ctx context.Context, p int, start pipeline.From) (pipeline.Source, error) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	src := &kafkaSource{ch: make(chan []pipeline.Fetched, sourceBuffer), cancel: cancel}
	topics := [2]string{s.cfg.Topics.Events, s.cfg.Topics.Labels}
	var peers []int
	if s.cfg.Pipeline.SharedAcrossPartitions {
		peers = make([]int, s.eventPartitions)
		for q := range peers {
			peers[q] = q
		}
	}
	inputs := start.Inputs(p, topics[pipeline.LabelsTopic] != "", peers)
	merged := len(inputs) > 1
	chans := make([]<-chan []pipeline.Fetched, len(inputs))
	from := make([]int64, len(inputs))
	for i, in := range inputs {
		ch := src.ch
		if merged {
			c := make(chan []pipeline.Fetched, sourceBuffer)
			ch, chans[i], from[i] = c, c, in.From
		}
		src.wg.Add(1)
		go func() {
			defer src.wg.Done()
			topic := topics[in.Topic]
			err := s.follow(rctx, ch, in.Topic, topic, in.Partition, in.From, merged, p, start.Strict)
			if err == nil || rctx.Err() != nil {
				return
			}
			select { // the Runner retries it when pipeline.IsRetriable
			case ch <- []pipeline.Fetched{{Err: fmt.Errorf("read %s/%d: %w", topic, in.Partition, err)}}:
			case <-rctx.Done():
			}
		}()
	}
	if merged {
		src.wg.Add(1)
		go func() {
			defer src.wg.Done()
			pipeline.Merge(rctx, chans, from, s.cfg.MergeWait, mergeBatch, src.ch, func(i int, next, end int64) {
				s.count.wentOn(p)
				s.log.Debug("the merge went on without a caught-up topic after the merge wait", "partition", p, "topic", topics[inputs[i].Topic], "topic_partition", inputs[i].Partition, "next", next, "end", end)
			})
		}()
	}
	return src, nil
}

// mergeBatch bounds the merged records handed to the Runner at once.
const mergeBatch = 512

// follow reads topic/p from offset from into ch for partition reader's
// worker (another partition's, for a shared part across partitions) until
// ctx ends or a read fails; every send gives way to cancellation, so a
// stopped partition never leaves a reader blocked.
func (s *Service) follow(ctx context.Context, ch chan<- []pipeline.Fetched, topicIdx int, topic string, p int, from int64, idle bool, reader int, strict bool) error {
	deleted := func(from, first int64) error {
		if strict {
			return fmt.Errorf("offsets %d to %d of %s/%d were deleted (retention) before the partition's rebuild read them, so its state cannot be rebuilt exactly; see docs/OPERATIONS.md, \"Rebuilding state\": %w",
				from, first-1, topic, p, pipeline.ErrInputGone)
		}
		if reader != p { // another partition's, for the shared part: its keys lost nothing
			s.log.Info("another partition's records were deleted by retention before the shared part read them; reading from the first one kept",
				"topic", topic, "partition", p, "reader", reader, "from", from, "first", first, "unread", first-from)
			return nil
		}
		s.log.Warn("records were deleted by retention before this read; reading from the first one kept: those not processed yet are lost, and those re-read for the inputs of events awaiting their label take those inputs with them (driftstream_label_inputs_lost_total)",
			"topic", topic, "partition", p, "from", from, "first", first, "lost", first-from)
		return nil
	}
	cfg := kafkaread.FollowConfig{Topic: topic, Partition: p, From: from, Isolation: s.cfg.Isolation, Deleted: deleted}
	return kafkasource.Feed(ctx, s.fetchTransport, kafka.TCP(s.cfg.Brokers...), cfg, topicIdx, 0, idle, ch)
}

// readerTransport is a transport for the input topics' fetches with t's
// settings (TLS, SASL, timeouts) and connections of its own, so that a
// fetch the broker holds never waits behind an output's produce request.
func readerTransport(t *kafka.Transport) *kafka.Transport {
	if t == nil {
		return &kafka.Transport{}
	}
	return &kafka.Transport{Dial: t.Dial, DialTimeout: t.DialTimeout, IdleTimeout: t.IdleTimeout, MetadataTTL: t.MetadataTTL,
		ClientID: t.ClientID, TLS: t.TLS, SASL: t.SASL, Resolver: t.Resolver, Context: t.Context}
}

func (src *kafkaSource) Records() <-chan []pipeline.Fetched { return src.ch }

func (src *kafkaSource) Close() error {
	src.cancel()
	src.wg.Wait()
	return nil
}

// The policies for an output the broker refuses for itself
// (Config.OnOutputError), as Kafka Streams' production exception handler.
const (
	// OnOutputErrorDeadLetter replaces the refused output with a dead
	// letter naming it (cut to fit) and goes on.
	OnOutputErrorDeadLetter = "dead-letter"
	// OnOutputErrorFail fails the partition, as any permanent error does.
	OnOutputErrorFail = "fail"
)

// kafkaSink writes outputs to the output topics, each on its input record's
// partition number and keyed by entity, so that a key's outputs stay in
// order on the partition of its inputs.
type kafkaSink struct {
	producers map[string]*OutputProducer
	transport *kafka.Transport
	// inputs name the input topics in the dead letters of refused outputs.
	inputs  [2]string
	onError string
	maxKey  int
	// refused is told of each refused output replaced by a dead letter.
	refused func(kind, reason string)
}

func newKafkaSink(cfg Config, refused func(kind, reason string)) *kafkaSink {
	// The producers get a transport of their own, never kafka-go's shared
	// DefaultTransport: its metadata cache (6 s) may predate the topics
	// New just created, and writes to them would fail as unknown topics for
	// seconds (seen as processing stalls in the throughput benchmark).
	transport := cfg.Transport
	if transport == nil {
		transport = &kafka.Transport{}
	}
	if cfg.OnOutputError == "" {
		cfg.OnOutputError = OnOutputErrorDeadLetter
	}
	if cfg.Pipeline.MaxKeyLength == 0 {
		cfg.Pipeline.MaxKeyLength = pipeline.DefaultMaxKeyLength
	}
	s := &kafkaSink{producers: map[string]*OutputProducer{}, transport: transport, inputs: [2]string{cfg.Topics.Events, cfg.Topics.Labels},
		onError: cfg.OnOutputError, maxKey: cfg.Pipeline.MaxKeyLength, refused: refused}
	for kind, topic := range map[string]string{pipeline.OutPrediction: cfg.Topics.Predictions, pipeline.OutQuery: cfg.Topics.Queries,
		pipeline.OutDeadLetter: cfg.Topics.DeadLetters, pipeline.OutAlert: cfg.Topics.Alerts} {
		if topic == "" {
			continue
		}
		p := NewOutputProducer(cfg.Brokers, topic, transport, cfg.Pipeline.Outputs.Of(kind))
		p.SetByPartition() // on the input record's partition number
		s.producers[kind] = p
	}
	return s
}

// Write writes every output, grouped by topic. After a partial failure the
// whole batch is written again by the Runner's retry: outputs are
// at-least-once, and the ones delivered twice are identical. An output the
// broker refuses for itself (too large, invalid) is replaced by a dead
// letter, written after the others, unless the policy is to fail.
func (s *kafkaSink) Write(ctx context.Context, outs []pipeline.Output) error {
	var replacements []pipeline.Output
	for kind, group := range grouped(outs, func(o pipeline.Output) string { return o.Kind }) {
		p, ok := s.producers[kind]
		if !ok {
			return fmt.Errorf("no topic for outputs of kind %q", kind)
		}
		err := p.Write(ctx, messages(group))
		var re *RefusedError
		if errors.As(err, &re) && s.onError == OnOutputErrorDeadLetter && kind != pipeline.OutDeadLetter {
			for _, r := range re.Refused {
				replacements = append(replacements, s.replacement(group[r.Index], p.Topic(), r.Err))
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("write %d %s outputs to %s: %w", len(group), kind, p.Topic(), err)
		}
	}
	if len(replacements) == 0 {
		return nil
	}
	p := s.producers[pipeline.OutDeadLetter]
	if err := p.Write(ctx, messages(replacements)); err != nil {
		return fmt.Errorf("write %d dead letters for refused outputs to %s: %w", len(replacements), p.Topic(), err)
	}
	for _, o := range replacements {
		s.refused(o.Headers["output-kind"], o.Headers["reason"])
	}
	return nil
}

// replacement is the dead letter of output o, which topic refused with err.
func (s *kafkaSink) replacement(o pipeline.Output, topic string, err error) pipeline.Output {
	reason := pipeline.ReasonOutputInvalid
	if errors.Is(err, kafka.MessageSizeTooLarge) || errors.Is(err, kafka.RecordListTooLarge) {
		reason = pipeline.ReasonOutputTooLarge
	}
	d := pipeline.DeadLetter{Reason: reason, Err: fmt.Errorf("the %s output of this record (%d bytes) was refused by topic %s: %w", o.Kind, len(o.Value), topic, err),
		SourceTopic: s.inputs[o.Source.Topic], Partition: o.Source.Partition, Offset: o.Source.Offset, Key: o.Key, Value: o.Value,
		Extra: map[string]string{"output-kind": o.Kind, "output-topic": topic}}
	dl := d.Output(s.producers[pipeline.OutDeadLetter].limit, s.maxKey)
	dl.Source = o.Source
	return dl
}

// messages are outputs as kafka-go messages on their input record's
// partition, their headers in key order (a replay writes the same record).
func messages(outs []pipeline.Output) []kafka.Message {
	msgs := make([]kafka.Message, len(outs))
	for i, o := range outs {
		msgs[i] = kafka.Message{Key: o.Key, Value: o.Value, Partition: o.Source.Partition}
		if len(o.Headers) > 0 {
			msgs[i].Headers = make([]kafka.Header, 0, len(o.Headers))
			for _, k := range slices.Sorted(maps.Keys(o.Headers)) {
				msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: k, Value: []byte(o.Headers[k])})
			}
		}
	}
	return msgs
}

// Close closes the producers' idle connections.
func (s *kafkaSink) Close() error {
	s.transport.CloseIdleConnections()
	return nil
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
