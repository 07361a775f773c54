// Package drift holds change detectors: small exact state machines that
// watch one key's stream of values — its prequential mistakes (0 or 1), or
// a label-free signal such as its query decisions or 1/(1+|score|) — and
// say when the stream's mean rose: a Drift means the watched quality got
// worse, never better. Each is the algorithm of its paper as MOA 2024.07
// runs it, alarm for alarm at the default parameters on 328 reference
// sequences (TestDetectorsMatchMOA; testdata/reference makes them), with a
// versioned binary snapshot so that a key's detector is checkpointed with
// its learner and replays bit for bit.
package drift

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/driftstream/driftstream/internal/wire"
)

// State is a detector's verdict after a value.
type State int

// The verdicts.
const (
	// Stable: no change seen.
	Stable State = iota
	// Warning: a change may be starting (detectors that have a warning level).
	Warning
	// Drift: a change is confirmed; the detector has restarted its statistics
	// on the values after it.
	Drift
)

func (s State) String() string { return [...]string{"stable", "warning", "drift"}[s] }

// Detector watches a stream of values.
type Detector interface {
	// Name is the catalog name the detector was built under.
	Name() string
	// Add feeds the next value and returns the verdict after it.
	Add(x float64) State
	// MarshalBinary and UnmarshalBinary round-trip the complete state;
	// AppendBinary appends what MarshalBinary returns to b (a key state's
	// encoder writes every detector of a key into one buffer).
	MarshalBinary() ([]byte, error)
	AppendBinary(b []byte) ([]byte, error)
	UnmarshalBinary([]byte) error
}

// ErrParam reports an invalid detector name or parameter.
var ErrParam = errors.New("invalid drift detector parameter")

// ErrSnapshot reports a snapshot that cannot be restored.
var ErrSnapshot = errors.New("bad drift detector snapshot")

// snapshotVersion starts every snapshot. Version 2 writes ADWIN's buckets
// compactly (adwin.MarshalBinary); the other detectors' layouts are those
// of version 1, which is still read.
const snapshotVersion = 2

// entry is a catalog entry: the detector's paper and its constructor;
// binary marks a detector whose test counts mistakes (values of 1).
type entry struct {
	name, paper string
	build       func(params json.RawMessage) (Detector, error)
	binary      bool
}

func catalog() []entry {
	return []entry{
		{"adwin", "Bifet & Gavaldà, Learning from Time-Changing Data with Adaptive Windowing, SDM 2007", buildADWIN, false},
		{"ddm", "Gama, Medas, Castillo & Rodrigues, Learning with Drift Detection, SBIA 2004", buildDDM, true},
		{"eddm", "Baena-García et al., Early Drift Detection Method, IWKDDS 2006", buildEDDM, true},
		{"page-hinkley", "Page, Continuous Inspection Schemes, Biometrika 1954 (MOA's PageHinkleyDM form)", buildPageHinkley, false},
		{"hddm-a", "Frías-Blanco et al., Online and Non-Parametric Drift Detection Methods Based on Hoeffding's Bounds, IEEE TKDE 2015", buildHDDMA, false},
	}
}

// Binary reports whether detector name's test assumes 0/1 values (DDM's
// binomial deviation, EDDM's distances between mistakes): on a real-valued
// signal it would be wrong, or silent.
func Binary(name string) bool {
	for _, e := range catalog() {
		if e.name == name {
			return e.binary
		}
	}
	return false
}

// MaxBytes bounds the snapshot of detector name with params over its whole
// life: a fixed size for most, ADWIN's histogram at its most rows.
func MaxBytes(name string, params json.RawMessage) (int, error) {
	d, err := New(name, params)
	if err != nil {
		return 0, err
	}
	if a, ok := d.(*adwin); ok {
		return a.maxBytes(), nil
	}
	b, err := d.MarshalBinary()
	return len(b) + 8*10, err // every varint at its widest
}

// Names lists the detectors, sorted.
func Names() []string {
	var out []string
	for _, e := range catalog() {
		out = append(out, e.name)
	}
	slices.Sort(out)
	return out
}

// Paper is the reference of detector name ("" when unknown).
func Paper(name string) string {
	for _, e := range catalog() {
		if e.name == name {
			return e.paper
		}
	}
	return ""
}

// New builds detector name with JSON parameters params (nil or empty for the
// defaults). Unknown names and parameters and out-of-range values are errors
// that name the culprit.
func New(name string, params json.RawMessage) (Detector, error) {
	for _, e := range catalog() {
		if e.name == name {
			return e.build(params)
		}
	}
	return nil, fmt.Errorf("unknown drift detector %q; valid: %s: %w", name, strings.Join(Names(), ", "), ErrParam)
}

// decodeParams fills p from raw, rejecting unknown keys.
func decodeParams(name string, raw json.RawMessage, p any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return fmt.Errorf("detector %s: parameters %s: %v: %w", name, raw, err, ErrParam)
	}
	return nil
}

func paramError(name, param string, v any, why string) error {
	return fmt.Errorf("detector %s: parameter %s = %v: %s: %w", name, param, v, why, ErrParam)
}

// writer appends a snapshot's fields; reader reads them back (package
// wire's idiom: zig-zag varints, floats as 8 bytes little endian).
// A writer is never kept: a value on its caller's stack, with what it
// wrote in b.
type writer struct{ b []byte }

// newWriter starts a snapshot of the detector name at the end of b.
func newWriter(b []byte, name string) writer {
	return writer{b: wire.AppendString(append(b, snapshotVersion), name)}
}

func (w *writer) f64(v float64) { w.b = wire.AppendFloat64(w.b, v) }
func (w *writer) int(v int64)   { w.b = binary.AppendVarint(w.b, v) }

// reader reads a snapshot's fields; the first failure sticks (wire.Reader).
type reader struct {
	wire.Reader
	version byte
}

func newReader(name string, b []byte) *reader {
	r := &reader{Reader: *wire.NewReader(b, ErrSnapshot)}
	if r.version = r.Byte(); r.version < 1 || r.version > snapshotVersion {
		r.Err = fmt.Errorf("snapshot version %d: %w", r.version, ErrSnapshot)
		return r
	}
	if got := r.View(); r.Err != nil || string(got) != name {
		r.Err = fmt.Errorf("not a %s snapshot: %w", name, ErrSnapshot)
	}
	return r
}

// fixed is a detector whose state is a fixed list of numbers.
type fixed interface {
	Name() string
	// state points at the state's integers and floats, in snapshot order.
	state() ([]*int64, []*float64)
}

// marshalFixed writes a fixed detector's state.
func marshalFixed(d fixed) ([]byte, error) { return appendFixed(nil, d) }

// appendFixed appends a fixed detector's snapshot to b.
func appendFixed(b []byte, d fixed) ([]byte, error) {
	w := newWriter(b, d.Name())
	ints, floats := d.state()
	for _, v := range ints {
		w.int(*v)
	}
	for _, v := range floats {
		w.f64(*v)
	}
	return w.b, nil
}

// unmarshalFixed restores a fixed detector's state, all or nothing.
func unmarshalFixed(d fixed, b []byte) error {
	r := newReader(d.Name(), b)
	ints, floats := d.state()
	iv, fv := make([]int64, len(ints)), make([]float64, len(floats))
	for i := range iv {
		iv[i] = r.Varint()
	}
	for i := range fv {
		fv[i] = r.Float64()
	}
	if err := r.Done(); err != nil {
		return err
	}
	for i, p := range ints {
		*p = iv[i]
	}
	for i, p := range floats {
		*p = fv[i]
	}
	return nil
}
