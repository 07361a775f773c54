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

// pageHinkley is the Page-Hinkley test (Page 1954), value for value as
// MOA's PageHinkleyDM (TestDetectorsMatchMOA): the cumulative sum
// m_T = α·m_{T−1} + (x_T − x̄_T − δ) of the deviations from the running mean,
// with forgetting α; from the MinInstances-th value on, a drift is
// signalled, and the test restarts, when m_T > λ. It is one-sided: a higher
// mean (more mistakes, more queries, a smaller margin) raises m_T, a lower
// one lowers it. Why this form and not the paper's m_T − min_t m_t: with
// the forgetting factor on m_T alone (the form River and earlier drift­stream
// used), m_T − min m_t grows as m_T decays back towards 0 after a fall, so a
// key that improves raises alarms; without forgetting, the gap of a
// stationary stream of 0s and 1s at δ = 0.005 and λ = 50 crosses λ about
// once per 22,000 values at a rate of 0.5 and once per 58,000 at 0.2
// (TestPaperPageHinkleyFalseAlarms). The forgetting sum stays near
// −δ/(1−α) = −50 while nothing changes, and crosses λ mostly when the mean
// rises (on the same streams, once per 750,000 values at 0.5 and 2.4
// million at 0.2).
type pageHinkley struct {
	p         PageHinkleyParams
	n         int64
	mean, sum float64
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
	d.sum = float64(d.p.Alpha*d.sum) + (x - d.mean - d.p.Delta) // the product rounded first, as Java rounds it
	if d.n+1 >= int64(d.p.MinInstances) && d.sum > d.p.Threshold {
		*d = pageHinkley{p: d.p}
		return Drift
	}
	return Stable
}

func (d *pageHinkley) state() ([]*int64, []*float64) {
	return []*int64{&d.n}, []*float64{&d.mean, &d.sum}
}

func (d *pageHinkley) MarshalBinary() ([]byte, error)        { return marshalFixed(d) }
func (d *pageHinkley) AppendBinary(b []byte) ([]byte, error) { return appendFixed(b, d) }
func (d *pageHinkley) UnmarshalBinary(b []byte) error        { return unmarshalFixed(d, b) }
