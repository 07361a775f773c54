package learners

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/driftstream/driftstream/internal/wire"
)

// FormatVersion is the newest snapshot format, whose version byte starts
// a snapshot; this build reads every version up to it. A learner's snapshot
// carries the newest version that changed its own layout, never below 2, so
// that a format change of one learner does not rewrite every other
// learner's bytes in every changelog:
//
//   - 2: the second-order learners' covariance is a packed upper triangle
//     (version 1 held the full matrix). Every other learner's layout is
//     version 1's; they write 2.
//   - 3: the budget perceptron's stored inputs are in the vector codec
//     (vectorcodec.go), the one layout of a Vector; before, they had their
//     own (decoder.vecV2).
const FormatVersion = 3

// baseVersion is the version byte of the snapshots whose layout did not
// change after version 2.
const baseVersion = 2

// ErrSnapshot reports a snapshot that cannot be restored: truncated, of an
// unknown version, or taken from a different learner configuration.
var ErrSnapshot = errors.New("bad learner snapshot")

// ErrConfiguration reports a snapshot taken from a learner of another name,
// dimension or parameters (it wraps ErrSnapshot too): the state of a
// deployment whose learner configuration changed.
var ErrConfiguration = errors.New("snapshot of another learner configuration")

// maxSnapshotLen bounds any length read from a snapshot so that a corrupt
// length cannot trigger a huge allocation.
const maxSnapshotLen = 1 << 31

// Config is what a learner needs besides its parameters: the input dimension
// and the identity of its random stream.
type Config struct {
	// Dim is the input dimension (≥ 1).
	Dim int
	// Seed is the global seed of the run.
	Seed uint64
	// Key identifies the entity (customer, device, ...) that owns the learner;
	// with Seed it fixes the learner's PCG stream, so that keys are independent.
	Key string

	shared *identity // set by a Maker: the identity every learner it builds shares
}

// KeyStream returns the PCG stream of (seed, key) that learners draw from.
// Other per-key randomness (the service's margin query rule) should use a
// derived key so that it does not share the learner's stream.
func KeyStream(seed uint64, key string) rand.PCG { return rngFor(seed, key) }

// rngFor returns the PCG stream of (seed, key): both words are mixed with
// SplitMix64 so that nearby seeds and similar keys give unrelated streams.
func rngFor(seed uint64, key string) rand.PCG {
	h := fnv.New64a()
	h.Write([]byte(key))
	return *rand.NewPCG(splitmix(seed), splitmix(h.Sum64()^splitmix(seed+0x9e3779b97f4a7c15)))
}

// randSource is a learner's random stream: the PCG state, which snapshots
// carry. The generator over it is made at each draw (draws) rather than kept:
// it does not escape, so it costs nothing, and a key holds 24 bytes less.
type randSource struct {
	src rand.PCG
}

// seed starts the stream of (cfg.Seed, cfg.Key).
func (r *randSource) seed(cfg Config) { r.src = rngFor(cfg.Seed, cfg.Key) }

// draws returns a generator drawing from (and advancing) the stream.
func (r *randSource) draws() *rand.Rand { return rand.New(&r.src) }

func splitmix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// meta is embedded by every learner: its identity, written at the head of
// every snapshot and checked when one is restored. It points to the identity
// so that the learners of one Maker share it: 8 bytes per key, not 48.
type meta struct {
	*identity
}

// identity is what a learner's snapshot header holds: catalog name,
// dimension and parameters. It is read-only once built.
type identity struct {
	name   string
	dim    int
	params []byte // canonical JSON of the resolved parameters
}

// Name is the catalog name of the learner.
func (m *meta) Name() string { return m.name }

// Dim is the input dimension.
func (m *meta) Dim() int { return m.dim }

// sharedIdentity is the learner's identity, read-only, for a Maker to share
// between the learners it builds.
func (m *meta) sharedIdentity() *identity { return m.identity }

// header starts a snapshot of a learner whose layout is version 2's:
// version, name, dimension and parameters.
func (m *meta) header() *encoder { return m.headerAt(baseVersion) }

// headerAt starts a snapshot of format version v.
func (m *meta) headerAt(v byte) *encoder {
	e := m.headerOnto(make([]byte, 0, 64+len(m.params)), v)
	return &e
}

// headerOnto starts a snapshot of format version v at the end of b: a
// value, which an appending encoder keeps on its stack.
func (m *meta) headerOnto(b []byte, v byte) encoder {
	e := encoder{b: append(b, v)}
	e.str(m.name)
	e.int(m.dim)
	e.bytes(m.params)
	return e
}

// snapshotHeader is the identity part of a snapshot, read in place: name
// and params share the snapshot's memory.
type snapshotHeader struct {
	name   []byte
	dim    int
	params []byte
}

// readHeader checks a snapshot's format version and reads its header, and
// returns a decoder positioned at the body. Nothing is copied: a restore
// opens a snapshot per key.
func readHeader(data []byte) (snapshotHeader, decoder, error) {
	if len(data) == 0 {
		return snapshotHeader{}, decoder{}, fmt.Errorf("empty snapshot: %w", ErrSnapshot)
	}
	if data[0] < 1 || data[0] > FormatVersion {
		return snapshotHeader{}, decoder{}, fmt.Errorf("snapshot format version %d, this build reads 1 to %d: %w", data[0], FormatVersion, ErrSnapshot)
	}
	d := newDecoder(data[1:], data[0])
	h := snapshotHeader{name: d.view(), dim: d.int(), params: d.view()}
	return h, d, d.err()
}

// SplitSnapshot splits a snapshot into its format version, its identity
// (the learner's name, dimension and parameters, as its header holds them)
// and its body, each sharing the snapshot's memory: a holder of many
// snapshots of one configuration (package keyed's key states) can keep the
// identity once, and JoinSnapshot puts a snapshot back together.
func SplitSnapshot(snapshot []byte) (version byte, identity, body []byte, err error) {
	_, d, err := readHeader(snapshot)
	if err != nil {
		return 0, nil, nil, err
	}
	n := len(snapshot) - d.left()
	return snapshot[0], snapshot[1:n], snapshot[n:], nil
}

// AppendSnapshot appends l's snapshot, the bytes l.MarshalBinary returns,
// to b: in place for a learner that appends its own
// (encoding.BinaryAppender), so that a caller encoding many keys reuses
// one buffer; for the others, a copy of MarshalBinary's.
func AppendSnapshot(b []byte, l Learner) ([]byte, error) {
	if a, ok := l.(encoding.BinaryAppender); ok {
		return a.AppendBinary(b)
	}
	snap, err := l.MarshalBinary()
	if err != nil {
		return b, err
	}
	return append(b, snap...), nil
}

// JoinSnapshot is the snapshot of format version, identity and body that
// SplitSnapshot gave, appended to b.
func JoinSnapshot(b []byte, version byte, identity, body []byte) []byte {
	b = append(b, version)
	b = append(b, identity...)
	return append(b, body...)
}

// open checks that a snapshot belongs to a learner of this name, dimension and
// parameters, and returns a decoder positioned at the body.
func (m *meta) open(data []byte) (decoder, error) {
	h, d, err := readHeader(data)
	switch {
	case err != nil:
		return d, err
	case string(h.name) != m.name:
		return d, fmt.Errorf("snapshot of learner %q restored into %q: %w: %w", h.name, m.name, ErrConfiguration, ErrSnapshot)
	case h.dim != m.dim:
		return d, fmt.Errorf("snapshot of dimension %d restored into dimension %d: %w: %w", h.dim, m.dim, ErrConfiguration, ErrSnapshot)
	case !bytes.Equal(h.params, m.params):
		return d, fmt.Errorf("snapshot parameters %s differ from the learner's %s (use Restore to take the snapshot's): %w: %w", h.params, m.params, ErrConfiguration, ErrSnapshot)
	}
	return d, nil
}

// encoder appends fixed-width little-endian values; floats keep their exact bits.
type encoder struct{ b []byte }

func (e *encoder) u64(v uint64)   { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) f64(v float64)  { e.u64(math.Float64bits(v)) }
func (e *encoder) int(v int)      { e.b = binary.AppendVarint(e.b, int64(v)) }
func (e *encoder) bytes(b []byte) { e.int(len(b)); e.b = append(e.b, b...) }
func (e *encoder) str(s string)   { e.int(len(s)); e.b = append(e.b, s...) }

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) f64s(v []float64) {
	e.int(len(v))
	n := len(e.b)
	e.b = slices.Grow(e.b, 8*len(v))[:n+8*len(v)] // once, not by doubling: a covariance is thousands of floats
	for i, x := range v {
		binary.LittleEndian.PutUint64(e.b[n+8*i:], math.Float64bits(x))
	}
}

func (e *encoder) ints(v []int) {
	e.int(len(v))
	for _, x := range v {
		e.int(x)
	}
}

func (e *encoder) rng(r *rand.PCG) {
	b, _ := r.MarshalBinary() // PCG marshaling cannot fail
	e.bytes(b)
}

// decoder reads what encoder wrote, over package wire's Reader: the first
// error sticks and every later read returns a zero value, so callers check
// d.err() once at the end.
type decoder struct {
	r       wire.Reader
	version byte // the snapshot's FormatVersion
}

func newDecoder(b []byte, version byte) decoder {
	return decoder{r: *wire.NewReader(b, ErrSnapshot), version: version}
}

// err is the first failure.
func (d *decoder) err() error { return d.r.Err }

func (d *decoder) fail(what string) { d.r.Fail("truncated or corrupt " + what) }

// setErr records err as the failure unless there is one already.
func (d *decoder) setErr(err error) {
	if d.r.Err == nil {
		d.r.Err = err
	}
}

func (d *decoder) u64() uint64  { return d.r.Uint64() }
func (d *decoder) f64() float64 { return d.r.Float64() }
func (d *decoder) int() int     { return int(d.r.Varint()) }
func (d *decoder) left() int    { return len(d.r.B) }

// length reads a length and checks it against [0, max] and against the bytes
// left after it (every element takes at least one byte).
func (d *decoder) length(max int) int {
	n := d.int()
	if d.err() != nil {
		return 0
	}
	if n < 0 || n > max || n > d.left() || n > maxSnapshotLen {
		d.fail(fmt.Sprintf("length %d (max %d)", n, max))
		return 0
	}
	return n
}

// view reads a length-prefixed byte string in place: the result shares the
// snapshot's memory, for what is read and dropped at once.
func (d *decoder) view() []byte {
	n := d.length(maxSnapshotLen)
	if d.err() != nil {
		return nil
	}
	v := d.r.B[:n:n]
	d.r.B = d.r.B[n:]
	return v
}

func (d *decoder) bool() bool {
	v := d.r.Byte()
	if v > 1 {
		d.fail("bool")
	}
	return v == 1
}

// f64s reads a float slice whose length must be exactly n (n < 0: any length
// that fits in the remaining bytes).
func (d *decoder) f64s(n int) []float64 {
	got := d.length(maxSnapshotLen)
	if d.err() == nil && got > d.left()/8 {
		d.fail(fmt.Sprintf("vector of length %d in %d bytes", got, d.left()))
	}
	if d.err() == nil && n >= 0 && got != n {
		d.fail(fmt.Sprintf("vector of length %d (want %d)", got, n))
	}
	if d.err() != nil {
		return nil
	}
	v := make([]float64, got)
	for i := range v {
		v[i] = d.f64()
	}
	return v
}

func (d *decoder) ints(max int) []int {
	n := d.length(maxSnapshotLen)
	if d.err() != nil {
		return nil
	}
	v := make([]int, n)
	for i := range v {
		v[i] = d.int()
		if v[i] < 0 || v[i] > max {
			d.fail("index")
			return nil
		}
	}
	return v
}

// vecV2 reads a stored input in the layout of format versions 1 and 2
// (varint dimension, bool sparse, sparse: varint count and indices, then
// the values as a float slice) and re-validates it. Version 3 snapshots
// hold inputs in the vector codec instead (vecV3).
func (d *decoder) vecV2(dim int) Vector {
	if got := d.int(); d.err() == nil && got != dim {
		d.fail("stored input dimension")
	}
	sparse := d.bool()
	var idx []int32
	if sparse {
		n := d.length(dim)
		idx = make([]int32, n)
		for k := range idx {
			idx[k] = int32(d.int())
		}
	}
	val := d.f64s(-1)
	if d.err() != nil {
		return Vector{}
	}
	var x Vector
	var err error
	if sparse {
		x, err = NewSparse(dim, idx, val)
	} else if len(val) != dim {
		err = fmt.Errorf("dense input of length %d", len(val))
	} else {
		x, err = NewDense(val)
	}
	if err != nil {
		d.setErr(fmt.Errorf("stored input: %v: %w", err, ErrSnapshot))
	}
	return x
}

// vecV3 reads a stored input of dimension dim in the vector codec.
func (d *decoder) vecV3(dim int) Vector {
	if d.err() != nil {
		return Vector{}
	}
	x, err := readVector(&d.r)
	switch {
	case d.err() != nil:
	case err != nil:
		d.setErr(fmt.Errorf("stored input: %w: %w", err, ErrSnapshot))
	case x.Dim() != dim:
		d.fail(fmt.Sprintf("stored input of dimension %d (want %d)", x.Dim(), dim))
	}
	return x
}

// rng reads a PCG state written by encoder.rng.
func (d *decoder) rng() rand.PCG {
	var r rand.PCG
	b := d.view()
	if d.err() != nil {
		return r
	}
	if err := r.UnmarshalBinary(b); err != nil {
		d.setErr(fmt.Errorf("rng state: %v: %w", err, ErrSnapshot))
	}
	return r
}

// end fails unless the whole snapshot was consumed.
func (d *decoder) end() error {
	if d.err() == nil && d.left() != 0 {
		d.setErr(fmt.Errorf("%d trailing bytes: %w", d.left(), ErrSnapshot))
	}
	return d.err()
}
