// Package topics holds driftstream's message contracts (docs/spec/DESIGN.md §2): the
// JSON input events and label records read from the events and labels topics,
// with their validation, and the vectorization that turns them into learner
// inputs. Every decoding error says what is wrong, so that the service can put
// the record on the dead-letter topic with that reason.
package topics

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/driftstream/driftstream/learners"
)

// ErrInvalid reports an event that breaks the contract.
var ErrInvalid = errors.New("invalid event")

// DefaultMaxBytes bounds an encoded event (1 MiB).
const DefaultMaxBytes = 1 << 20

// MaxIDBytes bounds an event id: ids are kept in pending label queries and
// copied into every output, so an unbounded one would bloat key records.
const MaxIDBytes = 256

// Kind tells an input event from a label record.
type Kind int

const (
	// Input is an event with features, optionally labeled.
	Input Kind = iota
	// LabelRecord gives the label of an earlier event by id.
	LabelRecord
)

// Event is a decoded input event or label record.
type Event struct {
	Kind Kind
	// ID is required and unique per key; it joins labels to events.
	ID string
	// TS is the event time, zero when absent.
	TS time.Time
	// X is the dense input (exactly one of X and Features for an Input).
	X []float64
	// Features are named sparse features, hashed into buckets.
	Features map[string]float64
	// Label is −1 or +1, or 0 when the event is unlabeled. A JSON label of 0
	// means −1 (docs/spec/DESIGN.md §2).
	Label int
}

// Decode parses and validates one event (docs/spec/DESIGN.md §2). maxBytes ≤ 0 means
// DefaultMaxBytes. It reads the fixed schema without reflection (about ten
// times faster than encoding/json, and two allocations for a dense event).
// It is stricter than encoding/json: unknown fields — a misspelt "lable"
// must not silently turn a labeled event into an unlabeled one —, fields
// given twice, field names in another case, invalid UTF-8 and lone UTF-16
// surrogates are errors; null leaves a field absent.
func Decode(b []byte, maxBytes int) (Event, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(b) > maxBytes {
		return Event{}, fmt.Errorf("event of %d bytes exceeds the limit of %d: %w", len(b), maxBytes, ErrInvalid)
	}
	var w wireFields
	if err := decodeWire(b, &w); err != nil {
		return Event{}, err
	}
	var ev Event
	hasID, hasTS, hasX, hasFeatures, hasLabel := w.present[fieldID], w.present[fieldTS], w.present[fieldX], w.present[fieldFeatures], w.present[fieldLabel]
	if !hasID || w.id == "" {
		return Event{}, fmt.Errorf(`missing "id": %w`, ErrInvalid)
	}
	if len(w.id) > MaxIDBytes {
		return Event{}, fmt.Errorf(`"id" of %d bytes exceeds the limit of %d: %w`, len(w.id), MaxIDBytes, ErrInvalid)
	}
	ev.ID = w.id
	if hasTS {
		ts, err := time.Parse(time.RFC3339Nano, w.ts)
		if err != nil {
			return Event{}, fmt.Errorf(`"ts" %s is not RFC 3339: %w`, Excerpt(w.ts), ErrInvalid)
		}
		ev.TS = ts
	}
	if hasLabel {
		// Any JSON number equal to -1, 0 or 1 (1.0 and -1e0 too: producers
		// that go through floats, pandas for one, write those); 0 means -1.
		switch w.label {
		case 1:
			ev.Label = 1
		case 0, -1:
			ev.Label = -1
		default:
			return Event{}, fmt.Errorf(`"label" %v: must be -1, 0 or +1: %w`, w.label, ErrInvalid)
		}
	}
	switch {
	case hasX && hasFeatures:
		return Event{}, fmt.Errorf(`both "x" and "features": give exactly one: %w`, ErrInvalid)
	case !hasX && !hasFeatures:
		if !hasLabel {
			return Event{}, fmt.Errorf(`neither "x" nor "features" nor "label": %w`, ErrInvalid)
		}
		ev.Kind = LabelRecord
	case hasX:
		if len(w.x) == 0 {
			return Event{}, fmt.Errorf(`empty "x": %w`, ErrInvalid)
		}
		ev.X = w.x
	default:
		if len(w.features) == 0 {
			return Event{}, fmt.Errorf(`empty "features": %w`, ErrInvalid)
		}
		ev.Features = w.features
	}
	return ev, nil
}

// Validate checks an event built in memory against the rules Decode
// enforces on the wire: an id within MaxIDBytes, a label of −1, 0 or +1,
// and for an input exactly one of a non-empty X and non-empty Features,
// every value finite; a label record (Kind LabelRecord) carries a label
// and no input. An event Decode returns passes it; an event that passes it
// reads back from its AppendJSON unchanged.
func (ev Event) Validate() error {
	switch {
	case ev.ID == "":
		return fmt.Errorf(`missing "id": %w`, ErrInvalid)
	case len(ev.ID) > MaxIDBytes:
		return fmt.Errorf(`"id" of %d bytes exceeds the limit of %d: %w`, len(ev.ID), MaxIDBytes, ErrInvalid)
	case ev.Label < -1 || ev.Label > 1:
		return fmt.Errorf(`"label" %d: must be -1, 0 or +1: %w`, ev.Label, ErrInvalid)
	}
	switch ev.Kind {
	case LabelRecord:
		if ev.Label == 0 || ev.X != nil || ev.Features != nil {
			return fmt.Errorf(`a label record has a label and no "x" or "features": %w`, ErrInvalid)
		}
		return nil
	case Input:
	default:
		return fmt.Errorf("unknown kind %d: %w", ev.Kind, ErrInvalid)
	}
	switch {
	case ev.X != nil && ev.Features != nil:
		return fmt.Errorf(`both "x" and "features": give exactly one: %w`, ErrInvalid)
	case ev.X == nil && ev.Features == nil:
		return fmt.Errorf(`an input has "x" or "features": %w`, ErrInvalid)
	case ev.X != nil && len(ev.X) == 0:
		return fmt.Errorf(`empty "x": %w`, ErrInvalid)
	case ev.Features != nil && len(ev.Features) == 0:
		return fmt.Errorf(`empty "features": %w`, ErrInvalid)
	}
	if i := learners.NonFinite(ev.X); i >= 0 {
		return fmt.Errorf(`"x"[%d] = %g is not finite: %w`, i, ev.X[i], ErrInvalid)
	}
	for name, v := range ev.Features {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf(`feature %s = %g is not finite: %w`, Excerpt(name), v, ErrInvalid)
		}
	}
	return nil
}

// Vectorizer turns events into learner inputs of one dimension Dim. Named
// features are hashed with Hasher (which must then be set, and Dim must
// equal its bucket count). Dense x must have DenseDim entries (Dim when
// DenseDim is 0); with a Hasher, x fills the first DenseDim coordinates of
// the hashed space, so that one deployment takes both kinds of event.
//
// With Bias, every input gets a constant coordinate 1 after the others
// (coordinate Dim-1): Dim counts it, DenseDim and the hashed buckets do
// not. Linear learners can then learn a threshold away from the origin.
type Vectorizer struct {
	Dim      int
	DenseDim int
	Hasher   *learners.Hasher
	Bias     bool
}

// WithBias is v with a constant coordinate 1 appended to every input.
func (v Vectorizer) WithBias() Vectorizer {
	if v.Bias {
		return v
	}
	if v.Hasher == nil {
		v.DenseDim = v.Dim
	}
	v.Dim++
	v.Bias = true
	return v
}

// NewVectorizer returns a vectorizer for dense inputs of dimension dim, or,
// with hashBits > 0, for named features hashed into 2^hashBits buckets —
// and, with both, for either kind: dense x of dim entries then fills the
// first dim of the 2^hashBits coordinates (which hashed features may share,
// as they share buckets with each other).
func NewVectorizer(dim, hashBits int) (Vectorizer, error) {
	if hashBits > 0 {
		h, err := learners.NewHasher(hashBits)
		if err != nil {
			return Vectorizer{}, err
		}
		if dim < 0 || dim > h.Dim() {
			return Vectorizer{}, fmt.Errorf("dense dimension %d: dense \"x\" fills the first coordinates of the 2^%d = %d hash buckets, so it must be between 0 and %d", dim, hashBits, h.Dim(), h.Dim())
		}
		return Vectorizer{Dim: h.Dim(), DenseDim: dim, Hasher: &h}, nil
	}
	if dim < 1 {
		return Vectorizer{}, fmt.Errorf("dimension %d: set the input dimension (dense \"x\") or hash bits (named \"features\")", dim)
	}
	return Vectorizer{Dim: dim}, nil
}

// Vector returns the learner input of an Input event.
func (v Vectorizer) Vector(ev Event) (learners.Vector, error) {
	if v.Bias {
		return v.withBias(ev)
	}
	switch {
	case ev.Kind != Input:
		return learners.Vector{}, fmt.Errorf("a label record has no features: %w", ErrInvalid)
	case ev.X != nil:
		want := v.Dim
		if v.Hasher != nil && v.DenseDim > 0 {
			want = v.DenseDim
		}
		if len(ev.X) != want {
			return learners.Vector{}, fmt.Errorf(`"x" has %d entries, the configured dimension is %d: %w`, len(ev.X), want, ErrInvalid)
		}
		if want < v.Dim {
			idx := make([]int32, want)
			for i := range idx {
				idx[i] = int32(i)
			}
			x, err := learners.NewSparse(v.Dim, idx, ev.X)
			if err != nil {
				return learners.Vector{}, fmt.Errorf("%v: %w", err, ErrInvalid)
			}
			return x, nil
		}
		x, err := learners.NewDense(ev.X)
		if err != nil {
			return learners.Vector{}, fmt.Errorf("%v: %w", err, ErrInvalid)
		}
		return x, nil
	case v.Hasher == nil:
		return learners.Vector{}, fmt.Errorf(`named "features" need hash bits configured: %w`, ErrInvalid)
	}
	x, err := v.Hasher.Vector(ev.Features)
	if err != nil {
		return learners.Vector{}, fmt.Errorf("%v: %w", err, ErrInvalid)
	}
	return x, nil
}

// withBias is Vector with the constant coordinate appended.
func (v Vectorizer) withBias(ev Event) (learners.Vector, error) {
	inner := v
	inner.Bias, inner.Dim = false, v.Dim-1
	if inner.Hasher == nil {
		inner.DenseDim = 0
	}
	x, err := inner.Vector(ev)
	if err != nil {
		return x, err
	}
	if !x.Sparse() {
		vals := make([]float64, v.Dim)
		x.Entries(func(i int, val float64) { vals[i] = val })
		vals[v.Dim-1] = 1
		return learners.NewDense(vals)
	}
	idx, vals := make([]int32, 0, x.NNZ()+1), make([]float64, 0, x.NNZ()+1)
	x.Entries(func(i int, val float64) {
		idx, vals = append(idx, int32(i)), append(vals, val)
	})
	return learners.NewSparse(v.Dim, append(idx, int32(v.Dim-1)), append(vals, 1))
}
