package backtest

import (
	"context"
	"testing"
	"time"

	"github.com/driftstream/driftstream/streams"
)

// The pipeline pass and the single-learner evaluator agree exactly on a
// deterministic learner, with labels inline and with labels arriving later
// as label records: the backtest's numbers are the service's, and they are
// the reproductions' too.
func TestPassAgreesWithEvaluate(t *testing.T) {
	var inline, delayed, held []streams.Example
	src := newDrifting(4, 2000, 1)
	for i := 0; ; i++ {
		ex, err := src.Next(context.Background())
		if err != nil {
			break
		}
		ex.Key = "" // one stream, as the papers run it
		ex.Time = time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC)
		inline = append(inline, ex)
		if i%3 == 0 { // a third of the labels come about 4 events later
			held = append(held, streams.Example{ID: ex.ID, Label: ex.Label, LabelRecord: true})
			ex.Label = 0
		}
		delayed = append(delayed, ex)
		if len(held) > 0 && i%3 == 1 && i >= 4 {
			delayed = append(delayed, held[0])
			held = held[1:]
		}
	}
	delayed = append(delayed, held...)
	for _, spec := range []Spec{{Name: "perceptron"}, {Name: "lasec"}, {Name: "shifting-perceptron"},
		{Name: "perceptron", Standardize: true}, {Name: "odm", Standardize: true}} {
		for name, events := range map[string][]streams.Example{"inline": inline, "delayed": delayed} {
			want, err := Evaluate(context.Background(), spec, events, 4, 1, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := PipelinePass(context.Background(), spec, events, 4, 1, Options{})
			if err != nil {
				t.Fatal(err)
			}
			// One query rate: the labels the learner asked for, in both.
			if got.Events != want.Events || got.Labeled != want.Labeled || got.Mistakes != want.Mistakes || got.Delayed != want.Delayed || got.Queries != want.Queries {
				t.Fatalf("%s, %s labels: pipeline %+v, evaluator %+v", spec.Name, name, got, want)
			}
			if name == "delayed" && got.Delayed == 0 {
				t.Fatalf("%s: no delayed label", spec.Name)
			}
			// The curve ends at the last event and carries event times, for
			// plots over time.
			end := time.Date(2026, 1, 1, 0, 1999, 0, 0, time.UTC)
			if len(got.Curve) == 0 || got.Curve[len(got.Curve)-1].Event != 2000 || !got.Curve[len(got.Curve)-1].Time.Equal(end) {
				t.Fatalf("%s: curve of %d points ends at %+v", spec.Name, len(got.Curve), got.Curve[len(got.Curve)-1])
			}
		}
	}
}
