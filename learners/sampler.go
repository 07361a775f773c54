package learners

import "math"

// sampler is the randomized query rule of the selective samplers (docs/spec/ALGORITHMS.md
// §5.3): ask for the label with probability s/(s + |p̂|), drawing exactly one
// uniform per round when the scale s is finite and none when it is +∞, which
// is how the supervised learners that share a sampler's code never query-draw.
type sampler struct {
	randSource
	scale float64
}

func (s *sampler) init(scale float64, cfg Config) {
	s.scale = scale
	s.seed(cfg)
}

// prob is the query probability for margin m.
func (s *sampler) prob(m float64) float64 {
	if math.IsInf(s.scale, 1) {
		return 1
	}
	return s.scale / (s.scale + math.Abs(m))
}

// QueryProbAt is the query probability for margin m (Summand).
func (s *sampler) QueryProbAt(m float64) float64 { return s.prob(m) }

// Decide draws the query decision for p.
func (s *sampler) Decide(p Prediction) Prediction {
	if math.IsInf(s.scale, 1) {
		p.Query = true
		return p
	}
	p.Query = s.draws().Float64() < p.QueryProb
	return p
}

// predict is the Predict of a margin learner: validate x, compute the margin,
// label it and attach the query probability.
func (s *sampler) predict(x Vector, dim int, version uint64, margin func() float64) (Prediction, error) {
	if err := checkDim(x, dim); err != nil {
		return Prediction{}, err
	}
	m := margin()
	if err := checkMargin(m); err != nil {
		return Prediction{}, err
	}
	p := labelPrediction(m, version)
	p.QueryProb = s.prob(m)
	return p, nil
}

func checkScale(learner, name string, v Real) error {
	if !v.positive() {
		return paramError(learner, name, float64(v), "must be > 0 (or \"inf\" to query every label)")
	}
	return nil
}
