// Package wire is driftstream's one binary idiom: the layouts of checkpoint
// records, key states, learner and detector snapshots, parked manifests and
// vectors are written with encoding/binary's Append functions (uvarint
// counts and lengths, zig-zag varints for signed values, "bytes" as a
// uvarint length then the bytes, floats as 8 bytes IEEE 754 little endian,
// AppendFloat64) and read back with a Reader, whose first failure sticks so
// that a decoder checks once, at the end.
package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// AppendFloat64 appends v's IEEE 754 bits, little endian: the exact float,
// NaN payloads and signed zeros included.
func AppendFloat64(b []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

// AppendBytes appends p as "bytes": its length as a uvarint, then p.
func AppendBytes(b, p []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(p))), p...)
}

// AppendSized appends what fill appends to b, as "bytes" (AppendBytes's
// layout), with no copy of its own: fill appends in place, and the length
// is put before what it appended (which moves by the length's size). On
// error b comes back as it was.
func AppendSized(b []byte, fill func([]byte) ([]byte, error)) ([]byte, error) {
	pos := len(b)
	b, err := fill(b)
	if err != nil {
		return b[:pos], err
	}
	n := len(b) - pos
	var size [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(size[:], uint64(n))
	b = append(b, size[:k]...)    // room for the length
	copy(b[pos+k:], b[pos:pos+n]) // what fill appended, moved up (copy handles the overlap)
	copy(b[pos:], size[:k])
	return b, nil
}

// AppendString appends s as "bytes", as AppendBytes does.
func AppendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// Reader consumes B. The first failure sets Err, wrapping the sentinel given
// to NewReader; later reads return zero values.
type Reader struct {
	B        []byte
	Err      error
	sentinel error
}

// NewReader reads b; failures wrap sentinel.
func NewReader(b []byte, sentinel error) *Reader { return &Reader{B: b, sentinel: sentinel} }

// Fail records a failure (the first one wins).
func (r *Reader) Fail(what string) {
	if r.Err == nil {
		r.Err = fmt.Errorf("%s: %w", what, r.sentinel)
	}
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Fail("truncated")
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Fail("truncated")
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Uint64 reads 8 bytes, little endian.
func (r *Reader) Uint64() uint64 {
	if b := r.fixed(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// fixed takes the next n bytes, or fails the reader (nil) when fewer are left.
func (r *Reader) fixed(n int) []byte {
	if r.Err != nil || len(r.B) < n {
		r.Fail("truncated")
		return nil
	}
	b := r.B[:n]
	r.B = r.B[n:]
	return b
}

// Uint32 reads 4 bytes, little endian.
func (r *Reader) Uint32() uint32 {
	if b := r.fixed(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// Float64 reads a float that AppendFloat64 wrote.
func (r *Reader) Float64() float64 { return math.Float64frombits(r.Uint64()) }

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.Err != nil || len(r.B) < 1 {
		r.Fail("truncated")
		return 0
	}
	v := r.B[0]
	r.B = r.B[1:]
	return v
}

// Bytes reads a length-prefixed byte string (a copy).
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if r.Err != nil || n > uint64(len(r.B)) {
		r.Fail("truncated")
		return nil
	}
	v := append([]byte(nil), r.B[:n]...)
	r.B = r.B[n:]
	return v
}

// View reads a length-prefixed byte string without copying it: the result
// shares the input's memory, for callers that decode it at once and keep
// nothing of it.
func (r *Reader) View() []byte {
	n := r.Uvarint()
	if r.Err != nil || n > uint64(len(r.B)) {
		r.Fail("truncated")
		return nil
	}
	v := r.B[:n:n]
	r.B = r.B[n:]
	return v
}

// Done fails unless everything was consumed, and returns the error.
func (r *Reader) Done() error {
	if r.Err == nil && len(r.B) != 0 {
		r.Fail(fmt.Sprintf("%d trailing bytes", len(r.B)))
	}
	return r.Err
}
