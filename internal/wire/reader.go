// Package wire reads the varint-framed binary layouts of driftstream's
// checkpoint records and key states, with a sticky error so that callers
// check once at the end.
package wire

import (
	"encoding/binary"
	"fmt"
)

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
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Fail("truncated")
		return 0
	}
	r.B = r.B[n:]
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
