package learners

import (
	"fmt"
	"hash/fnv"
	"sort"
)

// MaxHashBits bounds the hashing space at 2^28 buckets (2 GiB of float64 weights).
const MaxHashBits = 28

// Hasher maps named sparse features ("amount", "country=FR") into 2^bits
// buckets. The hash is FNV-1a 64 (hash/fnv) of the UTF-8 name, reduced to its
// low bits: bucket = fnv1a64(name) & (2^bits − 1). It is stable across
// processes, versions and platforms, so checkpoints taken with one build
// stay valid in the next; a golden test pins it. Colliding features add up.
type Hasher struct {
	bits int
	mask uint64
}

// NewHasher returns a Hasher into 2^bits buckets, 1 ≤ bits ≤ MaxHashBits.
func NewHasher(bits int) (Hasher, error) {
	if bits < 1 || bits > MaxHashBits {
		return Hasher{}, fmt.Errorf("hash bits %d out of range [1, %d]", bits, MaxHashBits)
	}
	return Hasher{bits: bits, mask: 1<<uint(bits) - 1}, nil
}

// Dim is the number of buckets, the dimension of the vectors Hasher builds.
func (h Hasher) Dim() int { return int(h.mask + 1) }

// Bucket returns the bucket of one feature name.
func (h Hasher) Bucket(name string) int32 {
	f := fnv.New64a()
	f.Write([]byte(name)) // never fails
	return int32(f.Sum64() & h.mask)
}

// Vector hashes named features into a sparse vector. Names are processed in
// sorted order so that colliding values add up in the same order every time;
// values must be finite.
func (h Hasher) Vector(features map[string]float64) (Vector, error) {
	if h.mask == 0 {
		return Vector{}, fmt.Errorf("hasher not initialized: use NewHasher")
	}
	names := make([]string, 0, len(features))
	for n := range features {
		names = append(names, n)
	}
	sort.Strings(names)
	idx := make([]int32, len(names))
	val := make([]float64, len(names))
	for k, n := range names {
		idx[k], val[k] = h.Bucket(n), features[n]
		if !finite(val[k]) {
			return Vector{}, fmt.Errorf("feature %q = %v: %w", n, val[k], ErrNonFinite)
		}
	}
	idx, val = SortSparse(idx, val)
	return NewSparse(h.Dim(), idx, val)
}
