// Package streams holds driftstream's stream sources: deterministic seeded
// generators of drifting concepts (docs/spec/ALGORITHMS.md §7) and, later, readers for
// CSV, JSONL and ARFF files. Every source implements Source, which the
// backtest and the Kafka pipeline both consume.
package streams

import (
	"context"
	"io"
	"time"

	"github.com/driftstream/driftstream/learners"
)

// Example is one event of a stream: an input with an optional label.
type Example struct {
	// ID identifies the event within its key; generators number events from 0.
	ID string
	// Key is the entity the event belongs to ("" for single-entity streams).
	Key string
	// Time is the event time; zero when the source has none.
	Time time.Time
	// X is the input.
	X learners.Vector
	// Label is −1 or +1, or 0 for an unlabeled event.
	Label int
	// Class is the raw label value of a multiclass file read with RawClass
	// (Label is then 0 until a mapping such as drifting-classes sets it).
	Class string
	// LabelRecord marks a label for the earlier event ID (no X): a delayed label.
	LabelRecord bool
}

// Source yields examples in stream order. Next returns io.EOF after the last
// example; it respects ctx cancellation.
type Source interface {
	// Dim is the dimension of every X the source yields.
	Dim() int
	// Next returns the next example.
	Next(ctx context.Context) (Example, error)
}

// WithBias appends a constant feature 1 to every input, so that linear
// learners without a bias term (all of driftstream's) can place a threshold
// away from the origin, as docs/spec/ALGORITHMS.md §2 recommends.
func WithBias(src Source) Source { return biasSource{src} }

type biasSource struct{ Source }

func (b biasSource) Dim() int { return b.Source.Dim() + 1 }

// DriftPoints passes on the wrapped source's drift points.
func (b biasSource) DriftPoints() []int {
	if d, ok := b.Source.(Drifting); ok {
		return d.DriftPoints()
	}
	return nil
}

func (b biasSource) Next(ctx context.Context) (Example, error) {
	ex, err := b.Source.Next(ctx)
	if err != nil || ex.LabelRecord {
		return ex, err
	}
	x := ex.X.Dense()
	x = append(x, 1)
	ex.X, err = learners.NewDense(x)
	return ex, err
}

// FromExamples replays examples held in memory as a Source of dimension dim.
func FromExamples(dim int, exs []Example) Source { return &examples{dim: dim, exs: exs} }

type examples struct {
	dim int
	exs []Example
}

func (e *examples) Dim() int { return e.dim }

func (e *examples) Next(ctx context.Context) (Example, error) {
	if err := ctx.Err(); err != nil {
		return Example{}, err
	}
	if len(e.exs) == 0 {
		return Example{}, io.EOF
	}
	ex := e.exs[0]
	e.exs = e.exs[1:]
	return ex, nil
}
