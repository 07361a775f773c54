package backtest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/streams"
)

// The pipeline pass agrees exactly with the plain prequential loop of the
// papers (reference, below), deterministic and randomized learners alike,
// with labels inline and with labels arriving later as label records:
// counts, expected mistakes, queries and the curve.
func TestPassAgreesWithReference(t *testing.T) {
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
		{Name: "perceptron", Standardize: true}, {Name: "odm", Standardize: true},
		{Name: "lasec-ss"}, {Name: "perceptron-ss"}, {Name: "bbq"}, {Name: "sop-ss"}, {Name: "dynamic-odm", Standardize: true}, {Name: "budget-perceptron"}, {Name: "bbq-i"}} {
		for name, events := range map[string][]streams.Example{"inline": inline, "delayed": delayed} {
			want, err := reference(spec, events, 4, 1, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := PipelinePass(context.Background(), spec, events, 4, 1, Options{})
			if err != nil {
				t.Fatal(err)
			}
			// One query rate: the labels the learner asked for, in both.
			got.Seconds, want.Seconds, got.Requests = 0, 0, 0
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, %s labels: pipeline %+v, reference %+v", spec.Name, name, got, want)
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

// reference runs one learner over events as the papers describe the
// protocol, with none of the pipeline's machinery: predict and decide
// every event; score a labeled one and teach the learner its label if it
// asked; hold an unlabeled event until its label record, then score its
// prediction and teach a label it asked for with a fresh prediction (the
// state moved on). The curve samples record 0, every, 2·every, … and the
// last, once a label was scored.
func reference(spec Spec, events []streams.Example, dim int, seed uint64, opts Options) (Run, error) {
	l, err := learners.New(spec.Name, spec.Params, learners.Config{Dim: dim, Seed: seed})
	if err != nil {
		return Run{}, err
	}
	var std *learners.Standardizer
	if spec.Standardize {
		if std, err = learners.NewStandardizer(dim); err != nil {
			return Run{}, err
		}
	}
	every, recent := opts.Curve(len(events))
	var run Run
	score := func(p learners.Prediction, label int) {
		run.Labeled++
		run.Expected += p.ExpectedMistake(label)
		if p.Label != label {
			run.Mistakes++
		}
		recent.Add(p.Label != label)
	}
	type pending struct {
		x learners.Vector
		p learners.Prediction
	}
	waiting := map[string]pending{}
	var last time.Time
	for i, ex := range events {
		switch w, ok := waiting[ex.ID]; {
		case ex.LabelRecord && !ok:
			run.Unknown++
		case ex.LabelRecord:
			delete(waiting, ex.ID)
			run.Delayed++
			w.p.Prob = float64(w.p.Label+1) / 2 // the wait keeps the label predicted, not its probability
			score(w.p, ex.Label)
			if w.p.Query {
				fresh, err := l.Predict(w.x)
				if err == nil {
					err = l.Learn(w.x, ex.Label, fresh)
				}
				if err != nil {
					return Run{}, err
				}
			}
		default:
			x := ex.X
			if std != nil {
				if x, err = std.Next(ex.X); err != nil {
					return Run{}, err
				}
			}
			p, err := l.Predict(x)
			if err != nil {
				return Run{}, err
			}
			p = l.Decide(p)
			run.Events++
			last = ex.Time
			if p.Query {
				run.Queries++
			}
			if ex.Label == 0 {
				waiting[ex.ID] = pending{x, p}
				break
			}
			score(p, ex.Label)
			if p.Query {
				if err := l.Learn(x, ex.Label, p); err != nil {
					return Run{}, err
				}
			}
		}
		if (i%every == 0 || i == len(events)-1) && recent.Len() > 0 {
			run.Curve = append(run.Curve, Point{Event: run.Events, CumMistakes: run.Mistakes, WindowAccuracy: recent.Value(), WindowLabeled: recent.Len(), Time: last})
		}
	}
	return run, nil
}

// Randomized predictions (Shifting Winnow's p(r), tracking Winnow's
// randomized transformation): the pass draws what the plain loop draws,
// and its expected mistakes are the predictions' probabilities.
func TestPassAgreesWithReferenceRandomized(t *testing.T) {
	events, dim := synthEvents(t, "synth:shifting-disjunction?T=2000", 5)
	for _, spec := range []Spec{{Name: "swin", Params: []byte(`{"randomized":true}`)}, {Name: "tracking-winnow", Params: []byte(`{"transform":2,"m":0.5}`)}} {
		want, err := reference(spec, events, dim, 1, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := PipelinePass(context.Background(), spec, events, dim, 1, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got.Seconds, got.Requests = 0, 0
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: pipeline %+v, reference %+v", spec.Name, got, want)
		}
		if spec.Name == "swin" && got.Expected == float64(got.Mistakes) {
			t.Fatalf("%s: expected mistakes %v equal the counted ones: not a randomized prediction", spec.Name, got.Expected)
		}
	}
}
