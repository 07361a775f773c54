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
// Morales-Bueno, Ortiz-Díaz & Caballero-Mota (IEEE TKDE 2015), value for
// value as MOA's HDDM_A_Test at its defaults (TestDetectorsMatchMOA): a
// test of a bounded stream's mean by Hoeffding's inequality ("A-test",
// averages). It keeps the running sum and count, the cut point where the
// mean plus its Hoeffding bound was lowest, and the one where the mean less
// its bound was highest. It signals a drift when the mean since the lowest
// cut exceeds the mean up to it by more than the bound for the drift
// confidence (a warning for the warning confidence), and then restarts. A
// mean that falls as significantly below the highest cut restarts it
// without an alert (MOA's "two-sided" test): an improvement raises no
// alert, and a later rise is measured from the better level. Values are
// clamped to [0, 1], the bound's range.
type hddmA struct {
	p          HDDMAParams
	n, c       float64 // count and sum of everything since the restart
	nMin, cMin float64 // count and sum up to the lowest cut
	nMax, cMax float64 // count and sum up to the highest cut
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
func bound(n, delta float64) float64 { return math.Sqrt(1.0 / (2 * n) * math.Log(1.0/delta)) }

func (d *hddmA) Add(x float64) State {
	x = min(max(x, 0), 1)
	d.n++
	d.c += x
	if d.nMin == 0 {
		d.nMin, d.cMin = d.n, d.c
	}
	if d.nMax == 0 {
		d.nMax, d.cMax = d.n, d.c
	}
	here := bound(d.n, d.p.DriftConfidence)
	if d.cMin/d.nMin+bound(d.nMin, d.p.DriftConfidence) >= d.c/d.n+here {
		d.nMin, d.cMin = d.n, d.c // a new lowest mean-plus-bound
	}
	if d.cMax/d.nMax-bound(d.nMax, d.p.DriftConfidence) <= d.c/d.n-here {
		d.nMax, d.cMax = d.n, d.c // a new highest mean-less-bound
	}
	state := Stable
	switch {
	case changed(d.cMin, d.nMin, d.c, d.n, d.p.DriftConfidence):
		*d = hddmA{p: d.p}
		return Drift
	case changed(d.cMin, d.nMin, d.c, d.n, d.p.WarningConfidence):
		state = Warning
	}
	if changed(d.c, d.n, d.cMax, d.nMax, d.p.DriftConfidence) { // fell: restart, quietly
		*d = hddmA{p: d.p}
	}
	return state
}

// changed tests whether the mean of everything (c/n) exceeds the mean up
// to the cut (cCut/nCut) by the bound for two averages at confidence delta;
// with the roles swapped (the cut's mean above everything's), whether the
// mean fell. The cut is one of the stream's prefixes.
func changed(cCut, nCut, c, n, delta float64) bool {
	if nCut == n {
		return false
	}
	lo, hi := min(nCut, n), max(nCut, n) // the prefix and the whole
	m := (hi - lo) / lo * (1.0 / hi)
	eps := math.Sqrt(m / 2 * math.Log(2.0/delta))
	return c/n-cCut/nCut >= eps
}

func (d *hddmA) state() ([]*int64, []*float64) {
	return []*int64{}, []*float64{&d.n, &d.c, &d.nMin, &d.cMin, &d.nMax, &d.cMax}
}

func (d *hddmA) MarshalBinary() ([]byte, error)        { return marshalFixed(d) }
func (d *hddmA) AppendBinary(b []byte) ([]byte, error) { return appendFixed(b, d) }
func (d *hddmA) UnmarshalBinary(b []byte) error        { return unmarshalFixed(d, b) }
