package backtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
)

// TwoFiles are a keyed history kept as two files, as a deployment keeps it
// in two topics: events (each with its key and its time, a label inline or
// not) and the labels that came later (label records with their key and
// time). Open opens a fresh reader of each; every partition reads both
// files once (keeping its keys), so each of its two inputs is read on its
// own, as the service reads two topics.
type TwoFiles struct {
	Events, Labels func() (streams.Source, error)
}

// fileInput replays TwoFiles as a producer that stamps every record with
// its line's time (to the millisecond, as a Kafka record timestamp) writes them to an events topic and a co-partitioned
// labels topic; each partition merges its two inputs with the service's
// merge (pipeline.Merge, waiting for an input until it has a record or
// ends), so the backtest predicts what the service predicts once both
// topics are written.
type fileInput struct {
	files    TwoFiles
	opts     MessageOptions
	parts    int
	balancer kafka.Balancer
	mu       sync.Mutex
	err      error
	wg       sync.WaitGroup
}

// FromFiles replays files over the given number of partitions, keys dealt
// by opts.Partitioner (the producer's). Every line of both files needs a
// key and a time ("ts"): the merge orders by time. opts.Keys and
// opts.LabelsDelay do not apply (the files say where labels are).
func FromFiles(files TwoFiles, opts MessageOptions, partitions int) (Input, error) {
	if partitions < 1 {
		return nil, fmt.Errorf("partitions %d: must be ≥ 1", partitions)
	}
	if files.Events == nil || files.Labels == nil {
		return nil, errors.New("two files: both the events and the labels are needed")
	}
	if opts.Partitioner == "" {
		opts.Partitioner = topics.DefaultPartitioner
	}
	balancer, err := topics.Balancer(opts.Partitioner)
	if err != nil {
		return nil, err
	}
	return &fileInput{files: files, opts: opts, parts: partitions, balancer: balancer}, nil
}

func (in *fileInput) Partitions() []int {
	ps := make([]int, in.parts)
	for p := range ps {
		ps[p] = p
	}
	return ps
}

func (in *fileInput) Total() int64 { return -1 }

func (in *fileInput) Err() error {
	in.wg.Wait()
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.err
}

// fail keeps the input's first error.
func (in *fileInput) fail(err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.err == nil {
		in.err = err
	}
}

// Open starts partition p's two readers at offsets from and its merge.
func (in *fileInput) Open(ctx context.Context, p int, start pipeline.From) (pipeline.Source, error) {
	from := start.Topics
	if p < 0 || p >= in.parts {
		return nil, fmt.Errorf("partition %d of %d", p, in.parts)
	}
	rctx, cancel := context.WithCancel(ctx)
	src := &chanSource{ch: make(chan []pipeline.Fetched, 8)}
	var inputs [2]chan []pipeline.Fetched
	var wg sync.WaitGroup
	for topic, open := range [2]func() (streams.Source, error){in.files.Events, in.files.Labels} {
		inputs[topic] = make(chan []pipeline.Fetched, 8)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(inputs[topic])
			err := in.read(rctx, open, topic, p, from[topic], inputs[topic])
			if err == nil || rctx.Err() != nil {
				return
			}
			in.fail(err)
			select { // not retriable: the partition fails with it
			case inputs[topic] <- []pipeline.Fetched{{Err: err}}:
			case <-rctx.Done():
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		pipeline.Merge(rctx, []<-chan []pipeline.Fetched{inputs[0], inputs[1]}, from[:], -1, dealBatch, src.ch, nil)
	}()
	in.wg.Add(1)
	closed := make(chan struct{})
	go func() { wg.Wait(); close(closed); in.wg.Done() }()
	src.close = func() { cancel(); <-closed }
	return src, nil
}

// read sends ch partition p's records of one file (topic: EventsTopic for
// the events, LabelsTopic for the labels) from offset from on, in batches.
func (in *fileInput) read(ctx context.Context, open func() (streams.Source, error), topic, p int, from int64, ch chan<- []pipeline.Fetched) error {
	src, err := open()
	if err != nil {
		return fmt.Errorf("%s file: %w", fileKind(topic == pipeline.LabelsTopic), err)
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	partitions := in.Partitions()
	var batch []pipeline.Fetched
	var offset int64
	send := func() error {
		select {
		case ch <- batch:
		case <-ctx.Done():
			return ctx.Err()
		}
		batch = nil
		return nil
	}
	_, err = FileRecords(ctx, src, topic == pipeline.LabelsTopic, in.opts, func(m Message) error {
		if in.balancer.Balance(kafka.Message{Key: m.Key}, partitions...) != p {
			return nil
		}
		if offset++; offset-1 < from {
			return nil
		}
		batch = append(batch, pipeline.Fetched{Record: pipeline.Record{Topic: topic, Partition: p, Offset: offset - 1, Key: m.Key, Value: m.Value, Decoded: m.Event, Time: m.Time}})
		if len(batch) == dealBatch {
			return send()
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		err = send()
	}
	return err
}

// fileKind names a file of TwoFiles: the labels one, or the events.
func fileKind(labels bool) string {
	if labels {
		return "labels"
	}
	return "events"
}

// FileRecords reads one file of a keyed history kept as two (TwoFiles: the
// events, or with labels the label records) and calls emit for each of its
// records as a producer writes it to its topic: keyed by the line's key,
// stamped with its time to the millisecond (a Kafka record timestamp),
// encoded by opts (an event keeps an inline label). A line without a key or
// a time, or a record of the other file's kind, is an error naming the file
// and the record. It returns the number of records.
func FileRecords(ctx context.Context, src streams.Source, labels bool, opts MessageOptions, emit func(Message) error) (int, error) {
	what := fileKind(labels)
	for n := 1; ; n++ {
		ex, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			return n - 1, nil
		}
		if err != nil {
			return n - 1, fmt.Errorf("%s file: %w", what, err)
		}
		switch {
		case ex.Key == "":
			return n - 1, fmt.Errorf("%s file, record %d (id %q): no key: each line needs the key field", what, n, ex.ID)
		case ex.Time.IsZero():
			return n - 1, fmt.Errorf("%s file, record %d (id %q): no \"ts\": the events and the labels are merged by time, as the service merges its two topics by record timestamp", what, n, ex.ID)
		case ex.LabelRecord != labels:
			return n - 1, fmt.Errorf("%s file, record %d (id %q): a label record belongs in the labels file and an event in the events file", what, n, ex.ID)
		}
		ev := labelOf(ex.ID, ex.Label)
		if !labels {
			ev = eventOf(ex, true)
		}
		m := opts.message(labels, []byte(ex.Key), ev)
		m.Time = time.UnixMilli(ex.Time.UnixMilli())
		if err := emit(m); err != nil {
			return n, err
		}
	}
}
