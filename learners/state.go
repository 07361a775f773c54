package learners

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
)

// FormatVersion is the version byte that starts every learner snapshot. A
// future format bumps it and keeps reading the older ones. Version 2 stores
// the second-order learners' covariance as a packed upper triangle (version 1
// held the full matrix); the other learners' snapshots are unchanged.
const FormatVersion = 2

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

// header starts a snapshot: version, name, dimension and parameters.
func (m *meta) header() *encoder {
	e := &encoder{b: make([]byte, 0, 64+len(m.params))}
	e.b = append(e.b, FormatVersion)
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
	d := decoder{b: data[1:], version: data[0]}
	h := snapshotHeader{name: d.view(), dim: d.int(), params: d.view()}
	return h, d, d.err
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

func (e *encoder) vec(x Vector) {
	e.int(x.dim)
	e.bool(x.idx != nil)
	if x.idx != nil {
		e.int(len(x.idx))
		for _, i := range x.idx {
			e.int(int(i))
		}
	}
	e.f64s(x.val)
}

func (e *encoder) rng(r *rand.PCG) {
	b, _ := r.MarshalBinary() // PCG marshaling cannot fail
	e.bytes(b)
}

// decoder reads what encoder wrote. The first error sticks and every later
// read returns a zero value, so callers check d.err once at the end.
type decoder struct {
	b       []byte
	err     error
	version byte // the snapshot's FormatVersion
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("truncated or corrupt %s: %w", what, ErrSnapshot)
	}
}

func (d *decoder) u64() uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.fail("u64")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) f64() float64 { return math.Float64frombits(d.u64()) }

func (d *decoder) int() int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("integer")
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

// length reads a length and checks it against [0, max] and against the bytes
// left after it (every element takes at least one byte).
func (d *decoder) length(max int) int {
	n := d.int()
	if d.err != nil {
		return 0
	}
	if n < 0 || n > max || n > len(d.b) || n > maxSnapshotLen {
		d.fail(fmt.Sprintf("length %d (max %d)", n, max))
		return 0
	}
	return n
}

// view reads a length-prefixed byte string in place: the result shares the
// snapshot's memory, for what is read and dropped at once.
func (d *decoder) view() []byte {
	n := d.length(maxSnapshotLen)
	if d.err != nil {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) bool() bool {
	if d.err != nil || len(d.b) < 1 || d.b[0] > 1 {
		d.fail("bool")
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

// f64s reads a float slice whose length must be exactly n (n < 0: any length
// that fits in the remaining bytes).
func (d *decoder) f64s(n int) []float64 {
	got := d.length(maxSnapshotLen)
	if d.err == nil && got > len(d.b)/8 {
		d.fail(fmt.Sprintf("vector of length %d in %d bytes", got, len(d.b)))
	}
	if d.err == nil && n >= 0 && got != n {
		d.fail(fmt.Sprintf("vector of length %d (want %d)", got, n))
	}
	if d.err != nil {
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
	if d.err != nil {
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

// vec reads a stored input and re-validates it.
func (d *decoder) vec(dim int) Vector {
	if got := d.int(); d.err == nil && got != dim {
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
	if d.err != nil {
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
		d.err = fmt.Errorf("stored input: %v: %w", err, ErrSnapshot)
	}
	return x
}

// rng reads a PCG state written by encoder.rng.
func (d *decoder) rng() rand.PCG {
	var r rand.PCG
	b := d.view()
	if d.err != nil {
		return r
	}
	if err := r.UnmarshalBinary(b); err != nil {
		d.err = fmt.Errorf("rng state: %v: %w", err, ErrSnapshot)
	}
	return r
}

// end fails unless the whole snapshot was consumed.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes: %w", len(d.b), ErrSnapshot)
	}
	return d.err
}
