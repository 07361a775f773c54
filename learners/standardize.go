package learners

import (
	"fmt"
	"math"
)

// Standardizer z-scores inputs online, coordinate by coordinate, with the
// running mean and variance of the inputs it has seen (Welford's update), so
// that learners whose steps depend on the input scale (ODM's and D-ODM's
// squared losses, the second-order learners' ridge) see inputs of unit scale
// whatever the stream's units: one x = 1e10 record then moves the statistics
// instead of making every later score vanish.
//
// Next maps x to z with the statistics so far, then adds x to them; the
// pipeline and the backtests call it on every event, so an event is scaled
// by what came before it only. Apply is Next without the update.
// A coordinate whose variance so far is zero (a constant bias feature, or
// any coordinate before the second input) passes through, so a bias
// survives; every output coordinate is clipped to ±StandardizeClip. The
// statistics are part of a key's state and go into its checkpoint
// (MarshalBinary), so that a restore scales the next event exactly as the
// uninterrupted run would.
type Standardizer struct {
	n        int64
	mean, m2 []float64
}

// StandardizeClip bounds every output coordinate: the first inputs give no
// or a poor estimate of the spread, and a drifting stream moves away from its
// running mean, so unbounded z-scores could still upset a learner's step.
const StandardizeClip = 5.0

// NewStandardizer returns a standardizer for inputs of dimension dim, with no
// statistics yet.
func NewStandardizer(dim int) (*Standardizer, error) {
	if dim < 1 || dim > MaxDim {
		return nil, fmt.Errorf("standardize: dimension %d: must be between 1 and %d: %w", dim, MaxDim, ErrParam)
	}
	return &Standardizer{mean: make([]float64, dim), m2: make([]float64, dim)}, nil
}

// Seen is the number of inputs the statistics hold.
func (s *Standardizer) Seen() int64 { return s.n }

// Apply returns x z-scored by the statistics so far, every coordinate
// clipped to ±StandardizeClip, and leaves the statistics as they are.
// Inputs must be dense.
func (s *Standardizer) Apply(x Vector) (Vector, error) {
	if err := s.check(x); err != nil {
		return Vector{}, err
	}
	z := make([]float64, len(x.val))
	for i, v := range x.val {
		z[i] = s.score(i, v)
	}
	return Vector{dim: len(z), val: z}, nil
}

// Next is the streaming step: it returns x z-scored by the inputs before it
// (as Apply does), then adds x to the statistics (Welford's update), in one
// pass over x.
func (s *Standardizer) Next(x Vector) (Vector, error) {
	if err := s.check(x); err != nil {
		return Vector{}, err
	}
	z := make([]float64, len(x.val))
	n := float64(s.n + 1)
	for i, v := range x.val {
		z[i] = s.score(i, v) // with the statistics before x
		d := v - s.mean[i]
		s.mean[i] += d / n
		s.m2[i] += d * (v - s.mean[i])
	}
	s.n++
	return Vector{dim: len(z), val: z}, nil
}

// score is value v of coordinate i z-scored by the statistics so far (left
// as it is while its spread is zero) and clipped to ±StandardizeClip.
func (s *Standardizer) score(i int, v float64) float64 {
	if s.n > 0 {
		if sd := math.Sqrt(s.m2[i] / float64(s.n)); sd > 0 {
			v = (v - s.mean[i]) / sd
		}
	}
	return max(-StandardizeClip, min(StandardizeClip, v))
}

// check refuses inputs of another dimension, and sparse (hashed) ones:
// centring them would make every input dense in the hashed dimension.
func (s *Standardizer) check(x Vector) error {
	if err := checkDim(x, len(s.mean)); err != nil {
		return err
	}
	if x.Sparse() {
		return fmt.Errorf("standardize: sparse (hashed) inputs cannot be standardized, centring would make them dense: scale the features at the producer: %w", ErrParam)
	}
	return nil
}

// MarshalBinary encodes the statistics exactly.
func (s *Standardizer) MarshalBinary() ([]byte, error) {
	e := &encoder{}
	e.int(int(s.n))
	e.f64s(s.mean)
	e.f64s(s.m2)
	return e.b, nil
}

// UnmarshalBinary restores statistics of the same dimension.
func (s *Standardizer) UnmarshalBinary(b []byte) error {
	d := newDecoder(b, 0)
	n := d.int()
	mean := d.f64s(len(s.mean))
	m2 := d.f64s(len(s.m2))
	if err := d.end(); err != nil {
		return fmt.Errorf("standardize: %w", err)
	}
	if n < 0 {
		return fmt.Errorf("standardize: %d inputs seen: %w", n, ErrSnapshot)
	}
	s.n, s.mean, s.m2 = int64(n), mean, m2
	return nil
}
