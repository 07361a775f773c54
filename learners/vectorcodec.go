package learners

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/driftstream/driftstream/internal/wire"
)

// The vector codec: the one binary layout of a Vector, used wherever one is
// stored — a key state's events awaiting their label (package pipeline) and
// the budget perceptron's stored inputs (its snapshot, from format version
// 3). In package wire's idiom:
//
//	uvarint dim
//	byte    sparse (0 dense, 1 sparse)
//	uvarint n, the entries (dense: n = dim)
//	n ×     (sparse: uvarint index, strictly increasing, < dim) float value
//
// Values are finite; a decoded vector is valid as NewDense and NewSparse
// make them.

// ErrVectorFormat reports bytes that are not a vector in the codec's layout.
var ErrVectorFormat = errors.New("bad vector encoding")

// AppendBinary appends x in the vector codec's layout (encoding.BinaryAppender).
func (x Vector) AppendBinary(b []byte) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(x.dim))
	if x.idx != nil {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(x.val)))
	for k, v := range x.val {
		if x.idx != nil {
			b = binary.AppendUvarint(b, uint64(x.idx[k]))
		}
		b = wire.AppendFloat64(b, v)
	}
	return b, nil
}

// MarshalBinary returns x in the vector codec's layout.
func (x Vector) MarshalBinary() ([]byte, error) { return x.AppendBinary(nil) }

// UnmarshalBinary sets x to the vector b holds, all of b, in the vector
// codec's layout. It refuses (ErrVectorFormat) a truncated or overlong
// encoding, an entry count the bytes cannot hold, indices out of order or
// out of range, and NaN or ±Inf values (ErrNonFinite too). The vector
// shares no memory with b.
func (x *Vector) UnmarshalBinary(b []byte) error {
	r := wire.NewReader(b, ErrVectorFormat)
	v, err := readVector(r)
	if err == nil {
		err = r.Done()
	}
	if err != nil {
		return fmt.Errorf("vector: %w", err)
	}
	*x = v
	return nil
}

// readVector reads one vector from r.
func readVector(r *wire.Reader) (Vector, error) {
	dim, sparse, n := r.Uvarint(), r.Byte(), r.Uvarint()
	per := uint64(8) // the least bytes an entry takes
	if sparse == 1 {
		per = 9
	}
	switch {
	case r.Err != nil:
		return Vector{}, r.Err
	case sparse > 1:
		return Vector{}, fmt.Errorf("sparse flag %d: %w", sparse, ErrVectorFormat)
	case dim > maxSnapshotLen || n > dim || sparse == 0 && n != dim:
		return Vector{}, fmt.Errorf("%d entries in dimension %d (sparse %v): %w", n, dim, sparse == 1, ErrVectorFormat)
	case n > uint64(len(r.B))/per:
		return Vector{}, fmt.Errorf("%d entries in %d bytes: %w", n, len(r.B), ErrVectorFormat)
	}
	var idx []int32
	if sparse == 1 {
		idx = make([]int32, n)
	}
	val := make([]float64, n)
	for k := range val {
		if idx != nil {
			i := r.Uvarint()
			if i >= dim {
				return Vector{}, fmt.Errorf("index %d in dimension %d: %w", i, dim, ErrVectorFormat)
			}
			idx[k] = int32(i)
		}
		val[k] = r.Float64()
	}
	if r.Err != nil {
		return Vector{}, r.Err
	}
	var x Vector
	var err error
	if idx != nil {
		x, err = NewSparse(int(dim), idx, val)
	} else {
		x, err = NewDense(val)
	}
	if err != nil {
		return Vector{}, fmt.Errorf("%w: %w", err, ErrVectorFormat)
	}
	return x, nil
}
