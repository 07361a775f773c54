package backtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
)

// chanSource is a partition's bounded record channel.
type chanSource struct {
	ch    chan []pipeline.Fetched
	close func()
}

func (s *chanSource) Records() <-chan []pipeline.Fetched { return s.ch }
func (s *chanSource) Close() error {
	if s.close != nil {
		s.close()
	}
	return nil
}

// messageInput partitions the messages of a streams.Source as the producer
// does (its partitioner over every partition of the topic),
// numbering each partition's records from offset 0: the records a service
// would read from a topic the producer wrote them to.
type messageInput struct {
	src      streams.Source
	opts     MessageOptions
	parts    int
	separate bool // label records on their own topic (index 1)
	// peers deals each partition the other partitions' records too (a
	// shared part across partitions: readPeers).
	peers    bool
	chans    []chan []pipeline.Fetched
	opened   []bool
	from     []pipeline.From // per partition: the offsets its Open asked for
	closed   []chan struct{} // per partition: closed by its source's Close
	closeP   []sync.Once
	balancer kafka.Balancer
	mu       sync.Mutex
	once     sync.Once
	err      error
	wg       sync.WaitGroup
	total    int64 // records in all, −1 when unknown
}

// FromSource replays src as the producer writes it (Messages with opts) to
// an events topic of the given partition count; with separateLabels, label
// records go to a co-partitioned labels topic, stamped as the producer
// stamps them when it writes such a topic (MessageOptions.Clock). Each
// partition reads its records in the order Messages emits them: the order
// in which the service's merge by timestamp (pipeline.Merge) takes the two
// topics once written (TestStampsMergeBackInOrder).
func FromSource(src streams.Source, opts MessageOptions, partitions int, separateLabels bool) (Input, error) {
	if partitions < 1 {
		return nil, fmt.Errorf("partitions %d: must be ≥ 1", partitions)
	}
	if opts.Keys < 1 || opts.LabelsDelay < 0 {
		return nil, fmt.Errorf("keys %d and labels delay %d: need ≥ 1 and ≥ 0", opts.Keys, opts.LabelsDelay)
	}
	if opts.Partitioner == "" {
		opts.Partitioner = topics.DefaultPartitioner
	}
	balancer, err := topics.Balancer(opts.Partitioner)
	if err != nil {
		return nil, err
	}
	in := &messageInput{src: src, opts: opts, parts: partitions, separate: separateLabels, balancer: balancer,
		chans: make([]chan []pipeline.Fetched, partitions), opened: make([]bool, partitions), total: -1,
		from: make([]pipeline.From, partitions), closed: make([]chan struct{}, partitions), closeP: make([]sync.Once, partitions)}
	for p := range in.chans {
		in.chans[p] = make(chan []pipeline.Fetched, 8)
		in.closed[p] = make(chan struct{})
	}
	if separateLabels && in.opts.Clock.IsZero() {
		in.opts.Clock = replayEpoch
	}
	return in, nil
}

// replayEpoch is the first record timestamp of a file replayed with
// separate labels when the options set no clock: the merge reads only the
// timestamps' order.
var replayEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func (in *messageInput) Partitions() []int {
	ps := make([]int, in.parts)
	for p := range ps {
		ps[p] = p
	}
	return ps
}

func (in *messageInput) Total() int64 { return in.total }

func (in *messageInput) Err() error {
	in.wg.Wait()
	return in.err
}

// Open hands partition p its channel; the first Open starts the one
// goroutine that reads the source and deals its records out. A file can be
// read once: a partition cannot be reopened.
func (in *messageInput) Open(ctx context.Context, p int, from pipeline.From) (pipeline.Source, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if p < 0 || p >= in.parts {
		return nil, fmt.Errorf("partition %d of %d", p, in.parts)
	}
	if in.opened[p] {
		return nil, fmt.Errorf("partition %d: a replayed file cannot be reopened (at %v)", p, from)
	}
	in.opened[p], in.from[p] = true, from
	if open := in.openedAll(); open {
		in.once.Do(func() {
			in.wg.Add(1)
			go in.deal(ctx) // ends with the replay: a failed partition stops the others
		})
	}
	return &chanSource{ch: in.chans[p], close: func() { in.closeP[p].Do(func() { close(in.closed[p]) }) }}, nil
}

// openedAll reports whether every partition was opened: the one pass over
// the source starts then, when each partition's start offsets are known.
// A partition never opened would hold the pass up; Run runs, and so opens,
// every partition.
func (in *messageInput) openedAll() bool {
	for _, o := range in.opened {
		if !o {
			return false
		}
	}
	return true
}

// dealBatch is how many records deal gathers for a partition before it
// hands them over (one channel operation per batch, as a fetch would).
const dealBatch = 256

// deal reads every message and sends it to its partition, in batches, then
// closes the partitions' channels.
func (in *messageInput) deal(ctx context.Context) {
	defer in.wg.Done()
	defer func() {
		for _, ch := range in.chans {
			close(ch)
		}
	}()
	partitions := make([]int, in.parts)
	for p := range partitions {
		partitions[p] = p
	}
	next := make([][2]int64, in.parts)
	pending := make([][]pipeline.Fetched, in.parts)
	send := func(p int) error {
		select {
		case in.chans[p] <- pending[p]:
		case <-in.closed[p]: // its source was closed: nobody reads it
		case <-ctx.Done():
			return ctx.Err()
		}
		pending[p] = nil
		return nil
	}
	add := func(p int, r pipeline.Record) error {
		pending[p] = append(pending[p], pipeline.Fetched{Record: r})
		if len(pending[p]) == dealBatch {
			return send(p)
		}
		return nil
	}
	_, err := Messages(ctx, in.src, in.opts, func(m Message) error {
		p := in.balancer.Balance(kafka.Message{Key: m.Key}, partitions...)
		topic := pipeline.EventsTopic
		if m.Labels && in.separate {
			topic = pipeline.LabelsTopic
		}
		offset := next[p][topic]
		next[p][topic]++
		rec := pipeline.Record{Topic: topic, Partition: p, Offset: offset, Key: m.Key, Value: m.Value, Decoded: m.Event, Time: m.Time}
		if in.peers {
			for q := range pending { // the other partitions read it too, in the same order
				if q != p && offset >= in.from[q].Peer(p, topic) {
					if err := add(q, rec); err != nil {
						return err
					}
				}
			}
		}
		if offset < in.from[p].Topics[topic] { // before where the partition's Open started it
			return nil
		}
		return add(p, rec)
	})
	for p := range pending {
		if err == nil && len(pending[p]) > 0 {
			err = send(p)
		}
	}
	in.err = err
}

// readPeers has every partition read the other partitions' records too,
// each partition all of them in the history's order (peerReader).
func (in *messageInput) readPeers() error {
	in.peers = true
	return nil
}

// FromExamples is FromSource over examples held in memory; their number of
// records is known, so progress lines give an ETA.
func FromExamples(dim int, exs []streams.Example, opts MessageOptions, partitions int, separateLabels bool) (Input, error) {
	in, err := FromSource(streams.FromExamples(dim, exs), opts, partitions, separateLabels)
	if err != nil {
		return nil, err
	}
	var n int64
	for _, ex := range exs {
		n++ // an event, or a label record passed through
		if !ex.LabelRecord && ex.Label != 0 && opts.LabelsDelay > 0 {
			n++ // its label, sent later
		}
	}
	in.(*messageInput).total = n
	return in, nil
}
