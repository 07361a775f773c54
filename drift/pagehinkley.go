package drift

import (
	"encoding/json"
	"math"
)

// PageHinkleyParams configure the Page-Hinkley test.
type PageHinkleyParams struct {
	// MinInstances is the number of values before any verdict (30).
	MinInstances int `json:"min_instances"`
	// Delta is the magnitude of change tolerated (0.005).
	Delta float64 `json:"delta"`
	// Threshold is λ, the cumulative deviation that signals a drift (50).
	Threshold float64 `json:"threshold"`
	// Alpha is the forgetting factor of the cumulative sum (1 − 0.0001).
	Alpha float64 `json:"alpha"`
}

// pageHinkley is the Page-Hinkley test (Page 1954), in the form used for
// concept drift by Mouss et al. (2004) and by MOA and River: the cumulative
// sum m_T = Σ (x_t − x̄_t − δ) of the deviations from the running mean, and
// its minimum M_T; a drift is signalled, and the test restarts, when
// m_T − M_T > λ. It detects increases of the mean (more mistakes, a higher
// query rate).
type pageHinkley struct {
	p             PageHinkleyParams
	n             int64
	mean, sum, mn float64
}

func buildPageHinkley(raw json.RawMessage) (Detector, error) {
	p := PageHinkleyParams{MinInstances: 30, Delta: 0.005, Threshold: 50, Alpha: 1 - 0.0001}
	if err := decodeParams("page-hinkley", raw, &p); err != nil {
		return nil, err
	}
	switch {
	case p.MinInstances < 1:
		return nil, paramError("page-hinkley", "min_instances", p.MinInstances, "must be ≥ 1")
	case !(p.Delta >= 0) || math.IsInf(p.Delta, 0):
		return nil, paramError("page-hinkley", "delta", p.Delta, "must be ≥ 0")
	case !(p.Threshold > 0) || math.IsInf(p.Threshold, 0):
		return nil, paramError("page-hinkley", "threshold", p.Threshold, "must be > 0")
	case !(p.Alpha > 0 && p.Alpha <= 1):
		return nil, paramError("page-hinkley", "alpha", p.Alpha, "must be in (0, 1]")
	}
	return &pageHinkley{p: p}, nil
}

func (d *pageHinkley) Name() string { return "page-hinkley" }

func (d *pageHinkley) Add(x float64) State {
	d.n++
	d.mean += (x - d.mean) / float64(d.n)
	d.sum = d.p.Alpha*d.sum + (x - d.mean - d.p.Delta)
	d.mn = min(d.mn, d.sum)
	if d.n >= int64(d.p.MinInstances) && d.sum-d.mn > d.p.Threshold {
		*d = pageHinkley{p: d.p}
		return Drift
	}
	return Stable
}

func (d *pageHinkley) state() ([]*int64, []*float64) {
	return []*int64{&d.n}, []*float64{&d.mean, &d.sum, &d.mn}
}

func (d *pageHinkley) MarshalBinary() ([]byte, error) { return marshalFixed(d) }
func (d *pageHinkley) UnmarshalBinary(b []byte) error { return unmarshalFixed(d, b) }
