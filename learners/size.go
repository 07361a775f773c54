package learners

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// stateSizer is implemented by every parameter struct: the largest number of
// 8-byte words (floats, counters, stored indexes) a learner with these
// parameters holds in dimension dim, over its whole life.
type stateSizer interface {
	maxWords(dim int) (int64, error)
}

// MaxDim is the largest input dimension a learner is sized for (2^30); it
// keeps every size computation far from overflow.
const MaxDim = 1 << 30

// snapshotOverhead covers a snapshot's header (version, name, dimension),
// counters and RNG state, besides the parameters' JSON.
const snapshotOverhead = 256

// StateBytes bounds the size of a snapshot of learner name with params in
// dimension dim, over the learner's whole life, without building it: a
// service checks it at start against its message and memory limits instead
// of allocating a state that does not fit (a full second-order learner over
// 2^16 hashed features would need 34 GB). Unknown names and parameters are
// the errors New gives.
func StateBytes(name string, params json.RawMessage, dim int) (int64, error) {
	words, p, err := stateWords(name, params, dim)
	if err != nil {
		return 0, err
	}
	return snapshotBytes(words, p), nil
}

// StateWords is the raw size of the state of learner name with params in
// dimension dim: the most 8-byte words (floats, counters, stored indexes)
// it holds over its life, without headers. Memory per key is measured
// against it (pipeline's BenchmarkKeyMemory).
func StateWords(name string, params json.RawMessage, dim int) (int64, error) {
	words, _, err := stateWords(name, params, dim)
	return words, err
}

func stateWords(name string, params json.RawMessage, dim int) (int64, any, error) {
	if dim < 1 || dim > MaxDim {
		return 0, nil, fmt.Errorf("learner %s: dimension %d: must be between 1 and %d: %w", name, dim, MaxDim, ErrParam)
	}
	for _, e := range entries() {
		if e.info.Name == name {
			return e.size(params, dim)
		}
	}
	return 0, nil, fmt.Errorf("%w %q; valid learners: %s", ErrUnknownLearner, name, strings.Join(Names(), ", "))
}

func snapshotBytes(words int64, p any) int64 {
	b, _ := json.Marshal(p)
	return mulSat(8, words) + snapshotOverhead + int64(len(b))
}

// mulSat is a·b for non-negative a and b, saturated at MaxInt64/16 so that
// sums of sizes cannot overflow either.
func mulSat(a, b int64) int64 {
	const limit = math.MaxInt64 / 16
	if a < 0 || b < 0 {
		return limit // a corrupt negative count: treat as too large
	}
	if a != 0 && b > limit/a {
		return limit
	}
	return a * b
}

func (PerceptronParams) maxWords(d int) (int64, error)         { return int64(d), nil }
func (PerceptronSSParams) maxWords(d int) (int64, error)       { return int64(d), nil }
func (ModifiedPerceptronParams) maxWords(d int) (int64, error) { return int64(d) + 4, nil }
func (ShiftingPerceptronParams) maxWords(d int) (int64, error) { return int64(d) + 4, nil }
func (ThresholdTrackerParams) maxWords(int) (int64, error)     { return 4, nil }
func (Winnow2Params) maxWords(d int) (int64, error)            { return int64(d), nil }
func (TrackingWinnowParams) maxWords(d int) (int64, error)     { return int64(d) + 1, nil }
func (SwinParams) maxWords(d int) (int64, error)               { return int64(d) + 1, nil }
func (ODMParams) maxWords(d int) (int64, error)                { return int64(d) + 4, nil }

// A stored example is at most d values with d indexes (sparse), plus its label.
func (p BudgetPerceptronParams) maxWords(d int) (int64, error) {
	return int64(d) + mulSat(int64(p.Budget), 2*int64(d)+2), nil
}

func (p DynamicODMParams) maxWords(d int) (int64, error) {
	periods, err := odmPeriods(&p)
	if err != nil {
		return 0, err
	}
	return mulSat(int64(len(periods)), int64(d)+6), nil
}

// rlsWords is the second-order state: w, and the covariance's packed upper
// triangle (d(d+1)/2) or its diagonal with one stamp per coordinate.
func rlsWords(d int, diagonal bool) int64 {
	if diagonal {
		return 3*int64(d) + 1
	}
	return int64(d)*(int64(d)+1)/2 + int64(d) + 1
}

func (p SOPParams) maxWords(d int) (int64, error)     { return rlsWords(d, p.Diagonal), nil }
func (p LASECParams) maxWords(d int) (int64, error)   { return rlsWords(d, p.Diagonal), nil }
func (p SOPSSParams) maxWords(d int) (int64, error)   { return rlsWords(d, p.Diagonal), nil }
func (p LASECSSParams) maxWords(d int) (int64, error) { return rlsWords(d, p.Diagonal), nil }
func (BBQParams) maxWords(d int) (int64, error)       { return rlsWords(d, false) + 1, nil }

// Members are sized by their own entries; their snapshots are nested whole.
func (p WeightedMajorityParams) maxWords(d int) (int64, error) {
	words := int64(len(p.Members))
	for _, m := range p.Members {
		b, err := StateBytes(m.Name, m.Params, d)
		if err != nil {
			return 0, err
		}
		words = min(words+(b+7)/8, math.MaxInt64/16)
	}
	return words, nil
}
