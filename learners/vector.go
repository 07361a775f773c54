package learners

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/floats"
)

// ErrDimension reports an input whose dimension differs from the learner's.
var ErrDimension = errors.New("dimension mismatch")

// ErrNonFinite reports a NaN or ±Inf in an input or in a computed margin.
var ErrNonFinite = errors.New("non-finite value")

// Vector is an input to a learner: dense or sparse, in one type. A Vector built
// by NewDense or NewSparse is valid by construction (finite values, sorted
// in-range indices), so learners only check its dimension on the hot path.
// The zero Vector has dimension 0 and is rejected by every learner.
type Vector struct {
	dim int
	idx []int32 // nil for dense; strictly increasing indices for sparse
	val []float64
}

// NewDense returns a dense vector over vals. It rejects NaN and ±Inf, naming the
// offending index. The vector aliases vals: do not modify vals afterwards.
func NewDense(vals []float64) (Vector, error) {
	if i := NonFinite(vals); i >= 0 {
		return Vector{}, fmt.Errorf("x[%d] = %v: %w", i, vals[i], ErrNonFinite)
	}
	return Vector{dim: len(vals), val: vals}, nil
}

// NonFinite is the index of the first NaN or ±Inf in vals, −1 when every
// value is finite. The common case costs one multiply-add per value: 0·v
// is 0 for a finite v and NaN otherwise, so the sum is NaN exactly when a
// value is not finite, and only then are the values searched.
func NonFinite(vals []float64) int {
	var s0, s1, s2, s3 float64 // four sums: no chain of dependent adds
	i := 0
	for ; i+4 <= len(vals); i += 4 {
		s0 += 0 * vals[i]
		s1 += 0 * vals[i+1]
		s2 += 0 * vals[i+2]
		s3 += 0 * vals[i+3]
	}
	for ; i < len(vals); i++ {
		s0 += 0 * vals[i]
	}
	if s0+s1+s2+s3 == 0 {
		return -1
	}
	for i, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return i
		}
	}
	return -1 // unreachable: a finite sum of zeros is 0
}

// NewSparse returns a sparse vector of dimension dim with vals at indices idx.
// Indices must be in [0, dim) and strictly increasing (use SortSparse first for
// unsorted input); values must be finite. Explicit zeros are kept (they cost
// time but are harmless). The vector aliases idx and vals.
func NewSparse(dim int, idx []int32, vals []float64) (Vector, error) {
	if dim < 0 {
		return Vector{}, fmt.Errorf("negative dimension %d", dim)
	}
	if len(idx) != len(vals) {
		return Vector{}, fmt.Errorf("sparse vector: %d indices but %d values", len(idx), len(vals))
	}
	prev := int32(-1)
	for k, i := range idx {
		if i < 0 || int(i) >= dim {
			return Vector{}, fmt.Errorf("sparse index %d out of range [0, %d)", i, dim)
		}
		if i <= prev {
			return Vector{}, fmt.Errorf("sparse indices not strictly increasing at position %d (%d after %d)", k, i, prev)
		}
		prev = i
		if v := vals[k]; math.IsNaN(v) || math.IsInf(v, 0) {
			return Vector{}, fmt.Errorf("x[%d] = %v: %w", i, v, ErrNonFinite)
		}
	}
	if idx == nil {
		idx = []int32{} // keep the sparse flag for an empty sparse vector
	}
	return Vector{dim: dim, idx: idx, val: vals}, nil
}

// SortSparse sorts idx and vals together by index and sums the values of
// repeated indices, returning the shortened slices. It prepares input for
// NewSparse, for example after feature hashing.
func SortSparse(idx []int32, vals []float64) ([]int32, []float64) {
	sort.Stable(pairs{idx, vals}) // stable: repeated indices sum in input order, deterministically
	n := 0
	for k := range idx {
		if n > 0 && idx[k] == idx[n-1] {
			vals[n-1] += vals[k]
			continue
		}
		idx[n], vals[n] = idx[k], vals[k]
		n++
	}
	return idx[:n], vals[:n]
}

type pairs struct {
	idx []int32
	val []float64
}

func (p pairs) Len() int           { return len(p.idx) }
func (p pairs) Less(i, j int) bool { return p.idx[i] < p.idx[j] }
func (p pairs) Swap(i, j int) {
	p.idx[i], p.idx[j] = p.idx[j], p.idx[i]
	p.val[i], p.val[j] = p.val[j], p.val[i]
}

// Dim is the vector's dimension.
func (x Vector) Dim() int { return x.dim }

// Sparse reports whether x is stored as index/value pairs.
func (x Vector) Sparse() bool { return x.idx != nil }

// NNZ is the number of stored entries: the dimension for a dense vector.
func (x Vector) NNZ() int { return len(x.val) }

// At returns x[i] in O(log nnz) for sparse vectors. It is for tests and tools,
// not for hot loops.
func (x Vector) At(i int) float64 {
	if x.idx == nil {
		return x.val[i]
	}
	k := sort.Search(len(x.idx), func(k int) bool { return int(x.idx[k]) >= i })
	if k < len(x.idx) && int(x.idx[k]) == i {
		return x.val[k]
	}
	return 0
}

// Entries calls f for every stored entry in increasing index order.
func (x Vector) Entries(f func(i int, v float64)) {
	if x.idx == nil {
		for i, v := range x.val {
			f(i, v)
		}
		return
	}
	for k, i := range x.idx {
		f(int(i), x.val[k])
	}
}

// DenseValues returns the values of a dense x, not a copy (which the caller
// must not modify), and whether x is dense: a read-only view where Dense's
// copy is not needed.
func (x Vector) DenseValues() ([]float64, bool) {
	if x.idx != nil {
		return nil, false
	}
	return x.val, true
}

// Dense returns x as a new dense slice.
func (x Vector) Dense() []float64 {
	out := make([]float64, x.dim)
	x.Entries(func(i int, v float64) { out[i] = v })
	return out
}

// Scale returns a new vector c·x with the same sparsity pattern.
func (x Vector) Scale(c float64) Vector {
	v := make([]float64, len(x.val))
	for k, xv := range x.val {
		v[k] = c * xv
	}
	return Vector{dim: x.dim, idx: x.idx, val: v}
}

// SquaredNorm is ‖x‖².
func (x Vector) SquaredNorm() float64 {
	return floats.Dot(x.val, x.val)
}

// dot returns w·x for a dense w of length x.dim.
func dot(w []float64, x Vector) float64 {
	if x.idx == nil {
		return floats.Dot(w, x.val)
	}
	s := 0.0
	for k, i := range x.idx {
		s += w[i] * x.val[k]
	}
	return s
}

// axpy adds c·x to the dense w.
func axpy(w []float64, c float64, x Vector) {
	if x.idx == nil {
		floats.AddScaled(w, c, x.val)
		return
	}
	for k, i := range x.idx {
		w[i] += c * x.val[k]
	}
}

// clone returns a deep copy of x, for learners that store inputs.
func (x Vector) clone() Vector {
	c := Vector{dim: x.dim, val: append([]float64(nil), x.val...)}
	if x.idx != nil {
		c.idx = append([]int32{}, x.idx...)
	}
	return c
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// checkDim returns an error wrapping ErrDimension unless x has dimension d.
func checkDim(x Vector, d int) error {
	if x.dim != d {
		return fmt.Errorf("input has dimension %d, learner has %d: %w", x.dim, d, ErrDimension)
	}
	return nil
}

// checkMargin turns a non-finite margin into an error. A NaN or ±Inf anywhere in
// the input always yields one, so this is also the learners' last line of
// defence against inputs that bypassed the constructors.
func checkMargin(m float64) error {
	if !finite(m) {
		return fmt.Errorf("margin is %v: %w", m, ErrNonFinite)
	}
	return nil
}
