package learners

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Member names one learner of a weighted-majority ensemble.
type Member struct {
	Name   string          `json:"name"`
	Params json.RawMessage `json:"params,omitempty"`
}

// WeightedMajorityParams configures `weighted-majority` (docs/spec/ALGORITHMS.md §4.4).
type WeightedMajorityParams struct {
	Members []Member `json:"members" def:"[]" doc:"member learners, [{\"name\": ..., \"params\": {...}}, ...]; at least one; samplers are not allowed"`
	Beta    float64  `json:"beta" doc:"β ∈ [0,1): a member's weight is multiplied by β on each of its mistakes"`
	Floor   float64  `json:"floor" doc:"γ ≥ 0: members whose weight is below γ/J of the total are not shrunk (tracking variant); 0 = plain WM"`
}

// weightedMajority is Littlestone and Warmuth's weighted majority over member
// learners with different parameters, as Mesterharm proposes to avoid tuning
// tracking Winnow: the vote follows whichever parameter setting is currently
// doing best, at a cost of O(log J) extra mistakes.
type weightedMajority struct {
	meta
	members []Learner
	v       []float64
	beta    float64
	floor   float64
	version uint64
}

// memberConfig gives member j its own random stream.
func memberConfig(cfg Config, j int) Config {
	return Config{Dim: cfg.Dim, Seed: cfg.Seed, Key: cfg.Key + "\x00member" + strconv.Itoa(j)}
}

func newWeightedMajority(p *WeightedMajorityParams, cfg Config) (Learner, error) {
	m, err := newMeta("weighted-majority", cfg, p)
	if err != nil {
		return nil, err
	}
	if len(p.Members) == 0 {
		return nil, paramError(m.name, "members", "[]", `needs at least one member, e.g. [{"name":"tracking-winnow","params":{"delta":0.5}}]`)
	}
	if !(p.Beta >= 0 && p.Beta < 1) {
		return nil, paramError(m.name, "beta", p.Beta, "must be in [0, 1)")
	}
	if !(p.Floor >= 0) || !finite(p.Floor) {
		return nil, paramError(m.name, "floor", p.Floor, "must be finite and ≥ 0")
	}
	l := &weightedMajority{meta: m, beta: p.Beta, floor: p.Floor, version: 1}
	for j, mem := range p.Members {
		info, err := Lookup(mem.Name)
		if err != nil {
			return nil, fmt.Errorf("learner weighted-majority: member %d: %w", j, err)
		}
		if info.Sampling {
			return nil, fmt.Errorf("learner weighted-majority: member %d (%s) is a selective sampler; members must learn from every label: %w", j, mem.Name, ErrParam)
		}
		ml, err := New(mem.Name, mem.Params, memberConfig(cfg, j))
		if err != nil {
			return nil, fmt.Errorf("learner weighted-majority: member %d: %w", j, err)
		}
		l.members = append(l.members, ml)
		l.v = append(l.v, 1)
	}
	return l, nil
}

// vote returns q₁ − q₀ and q₁ + q₀ for the members' labels.
func (l *weightedMajority) vote(ps []Prediction) (diff, total float64) {
	for j, mp := range ps {
		if mp.Label > 0 {
			diff += l.v[j]
		} else {
			diff -= l.v[j]
		}
		total += l.v[j]
	}
	return diff, total
}

func (l *weightedMajority) prediction(ps []Prediction) Prediction {
	diff, total := l.vote(ps)
	p := labelPrediction(diff/total, l.version)
	p.members = ps
	return p
}

func (l *weightedMajority) Predict(x Vector) (Prediction, error) {
	if err := checkDim(x, l.dim); err != nil {
		return Prediction{}, err
	}
	ps := make([]Prediction, len(l.members))
	for j, ml := range l.members {
		var err error
		if ps[j], err = ml.Predict(x); err != nil {
			return Prediction{}, fmt.Errorf("member %d (%s): %w", j, ml.Name(), err)
		}
	}
	return l.prediction(ps), nil
}

// Decide decides every member's round (randomized members draw here) and
// votes on the decided labels.
func (l *weightedMajority) Decide(p Prediction) Prediction {
	if len(p.members) != len(l.members) {
		p.Query = true
		return p
	}
	ps := make([]Prediction, len(p.members))
	for j, ml := range l.members {
		ps[j] = ml.Decide(p.members[j])
	}
	out := l.prediction(ps)
	out.stamp = p.stamp
	out.Query = true
	return out
}

func (l *weightedMajority) Learn(x Vector, y int, p Prediction) error {
	if len(p.members) != len(l.members) {
		p.stamp = 0 // not a weighted-majority prediction: recompute
	}
	p, err := current(l, l.version, x, y, p)
	if err != nil {
		return err
	}
	total := 0.0
	for _, v := range l.v {
		total += v
	}
	limit := l.floor / float64(len(l.v)) * total
	for j, mp := range p.members {
		if mp.Label != y && !(l.floor > 0 && l.v[j] < limit) {
			l.v[j] *= l.beta
		}
	}
	l.rescale()
	for j, ml := range l.members {
		if err := ml.Learn(x, y, p.members[j]); err != nil {
			return fmt.Errorf("member %d (%s): %w", j, ml.Name(), err)
		}
	}
	l.version++
	return nil
}

// rescale divides the weights by their maximum once it falls below 1e−200.
// If every weight is 0 (β = 0 and all members wrong), all restart at 1.
func (l *weightedMajority) rescale() {
	mx := 0.0
	for _, v := range l.v {
		mx = math.Max(mx, v)
	}
	switch {
	case mx == 0:
		for j := range l.v {
			l.v[j] = 1
		}
	case mx < 1e-200:
		for j := range l.v {
			l.v[j] /= mx
		}
	}
}

// weights returns the master weights, for tests and tools.
func (l *weightedMajority) weights() []float64 { return append([]float64(nil), l.v...) }

func (l *weightedMajority) MarshalBinary() ([]byte, error) {
	e := l.header()
	e.u64(l.version)
	e.f64s(l.v)
	for _, ml := range l.members {
		b, err := ml.MarshalBinary()
		if err != nil {
			return nil, err
		}
		e.bytes(b)
	}
	return e.b, nil
}

func (l *weightedMajority) UnmarshalBinary(data []byte) error {
	d, err := l.open(data)
	if err != nil {
		return err
	}
	version, v := d.u64(), d.f64s(len(l.members))
	snaps := make([][]byte, len(l.members))
	for j := range snaps {
		snaps[j] = d.view() // the members decode their snapshots at once, by copy
	}
	if err := d.end(); err != nil {
		return err
	}
	// Restore members into fresh copies so that a bad member leaves l untouched.
	restored := make([]Learner, len(l.members))
	for j, ml := range l.members {
		c, err := Restore(snaps[j])
		if err != nil {
			return fmt.Errorf("member %d: %w", j, err)
		}
		if c.Name() != ml.Name() || c.Dim() != ml.Dim() {
			return fmt.Errorf("member %d is %s, snapshot holds %s: %w", j, ml.Name(), c.Name(), ErrSnapshot)
		}
		restored[j] = c
	}
	l.version, l.v, l.members = version, v, restored
	return nil
}
