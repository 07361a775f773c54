package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/topics"
)

// sliceSource is a bounded Source over records in memory: one batch, then
// the end of the input.
type sliceSource struct{ ch chan []pipeline.Fetched }

func newSliceSource(recs []pipeline.Record) *sliceSource {
	batch := make([]pipeline.Fetched, len(recs))
	for i, r := range recs {
		batch[i] = pipeline.Fetched{Record: r}
	}
	s := &sliceSource{ch: make(chan []pipeline.Fetched, 1)}
	s.ch <- batch
	close(s.ch)
	return s
}

func (s *sliceSource) Records() <-chan []pipeline.Fetched { return s.ch }
func (s *sliceSource) Close() error                       { return nil }

// outputs is a Sink that keeps what it is given.
type outputs struct{ kinds []string }

func (o *outputs) Write(_ context.Context, outs []pipeline.Output) error {
	for _, out := range outs {
		o.kinds = append(o.kinds, out.Kind)
	}
	return nil
}

// A Runner over a source: one partition's records through the pipeline,
// checkpointed to a store, outputs written to a sink. The service runs one
// per assigned partition over Kafka; a backtest one per partition of a
// history.
func ExampleRunner() {
	vec, _ := topics.NewVectorizer(2, 0)
	var recs []pipeline.Record
	for i, v := range []string{
		`{"id":"a","x":[1,0],"label":1}`,
		`{"id":"b","x":[0,1],"label":-1}`,
		`{"id":"c","x":[1,0]}`, // unlabeled: a label request when the learner asks
		`{"id":"c","label":1}`, // its label, later: scores and teaches
		`not json`,             // a dead letter, never a stop
	} {
		recs = append(recs, pipeline.Record{Topic: pipeline.EventsTopic, Offset: int64(i), Key: []byte("customer-1"), Value: []byte(v)})
	}
	sink := &outputs{}
	r, err := pipeline.NewRunner(pipeline.RunnerConfig{
		Pipeline: pipeline.Config{Settings: keyed.Settings{Learner: "perceptron", Vector: vec, QueryScale: 100}}, // asks with probability 100/(100+|score|),
		Store:    checkpoint.NewMemoryStore(),
		Open: func(context.Context, pipeline.From) (pipeline.Source, error) {
			return newSliceSource(recs), nil
		},
		Sink:             sink,
		CheckpointEvery:  100,
		CheckpointPeriod: time.Minute,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := r.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	t := r.Snapshot().Totals
	fmt.Println(strings.Join(sink.kinds, " "))
	fmt.Printf("events %d, labeled %d (delayed %d), dead letters %d\n", t.Events, t.Labeled, t.DelayedLabeled, t.DeadLetters)
	// Output:
	// prediction prediction prediction label-query dead-letter
	// events 3, labeled 3 (delayed 1), dead letters 1
}
