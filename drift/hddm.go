package drift

import (
	"encoding/json"
	"math"
)

// HDDMAParams configure HDDM-A.
type HDDMAParams struct {
	// DriftConfidence and WarningConfidence are the significance levels of
	// the drift and warning tests (0.001 and 0.005).
	DriftConfidence   float64 `json:"drift_confidence"`
	WarningConfidence float64 `json:"warning_confidence"`
}

// hddmA is HDDM_A of Frías-Blanco, del Campo-Ávila, Ramos-Jiménez,
// Morales-Bueno, Ortiz-Díaz & Caballero-Mota (IEEE TKDE 2015): a test of
// the increase of a bounded stream's mean by Hoeffding's inequality
// ("A-test", averages). It keeps the running sum and count, and the cut
// point where the mean plus its Hoeffding bound was lowest; it signals a
// drift when the mean since the cut exceeds the mean up to it by more than
// the bound for the drift confidence (a warning for the warning
// confidence), and then restarts. Values must lie in [0, 1].
type hddmA struct {
	p          HDDMAParams
	n, c       float64 // count and sum of everything since the restart
	nCut, cCut float64 // count and sum up to the cut point
}

func buildHDDMA(raw json.RawMessage) (Detector, error) {
	p := HDDMAParams{DriftConfidence: 0.001, WarningConfidence: 0.005}
	if err := decodeParams("hddm-a", raw, &p); err != nil {
		return nil, err
	}
	if !(0 < p.DriftConfidence && p.DriftConfidence < p.WarningConfidence && p.WarningConfidence < 1) {
		return nil, paramError("hddm-a", "drift_confidence/warning_confidence", []float64{p.DriftConfidence, p.WarningConfidence},
			"need 0 < drift_confidence < warning_confidence < 1")
	}
	return &hddmA{p: p}, nil
}

func (d *hddmA) Name() string { return "hddm-a" }

// bound is Hoeffding's ε for the mean of n values in [0, 1] at confidence δ.
func bound(n, delta float64) float64 { return math.Sqrt(math.Log(1/delta) / (2 * n)) }

func (d *hddmA) Add(x float64) State {
	x = min(max(x, 0), 1)
	d.n++
	d.c += x
	if d.nCut == 0 || d.cCut/d.nCut+bound(d.nCut, d.p.DriftConfidence) >= d.c/d.n+bound(d.n, d.p.DriftConfidence) {
		d.nCut, d.cCut = d.n, d.c // a new lowest mean-plus-bound: cut here
	}
	switch {
	case d.increased(d.p.DriftConfidence):
		*d = hddmA{p: d.p}
		return Drift
	case d.increased(d.p.WarningConfidence):
		return Warning
	}
	return Stable
}

// increased tests H0: the mean after the cut is not above the mean up to it
// (the paper's bound for the difference of two averages).
func (d *hddmA) increased(delta float64) bool {
	if d.nCut == d.n {
		return false
	}
	m := (d.n - d.nCut) / (d.nCut * d.n)
	eps := math.Sqrt(m / 2 * math.Log(2/delta))
	return d.c/d.n-d.cCut/d.nCut >= eps
}

func (d *hddmA) state() ([]*int64, []*float64) {
	return []*int64{}, []*float64{&d.n, &d.c, &d.nCut, &d.cCut}
}

func (d *hddmA) MarshalBinary() ([]byte, error) { return marshalFixed(d) }
func (d *hddmA) UnmarshalBinary(b []byte) error { return unmarshalFixed(d, b) }
