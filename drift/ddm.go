package drift

import (
	"encoding/json"
	"math"
)

// DDMParams configure DDM.
type DDMParams struct {
	// MinInstances is the number of values before any verdict (30).
	MinInstances int `json:"min_instances"`
	// Warning and Drift are the levels, in standard deviations above the
	// lowest p+s seen, of the warning and drift states (2 and 3).
	Warning float64 `json:"warning"`
	Drift   float64 `json:"drift"`
}

// ddm is the Drift Detection Method of Gama, Medas, Castillo & Rodrigues
// (SBIA 2004), value for value as MOA's DDM (TestDetectorsMatchMOA). Over a
// stream of mistakes (1) and right predictions (0) it keeps the error rate
// p_i and its standard deviation s_i = √(p_i(1−p_i)/i), and the point where
// p_i + s_i was lowest (p_min, s_min). From the MinInstances-th value on it
// warns when p_i + s_i > p_min + 2·s_min, and from the value after it signals
// a drift, then restarts, when p_i + s_i > p_min + 3·s_min (the levels are
// parameters). It is one-sided: only a rising error rate moves p_i + s_i
// away from its minimum. Its test assumes 0/1 values: the service refuses it
// on a real-valued signal.
type ddm struct {
	p          DDMParams
	n          int64 // values since the restart
	rate       float64
	pMin, sMin float64
}

func buildDDM(raw json.RawMessage) (Detector, error) {
	p := DDMParams{MinInstances: 30, Warning: 2, Drift: 3}
	if err := decodeParams("ddm", raw, &p); err != nil {
		return nil, err
	}
	switch {
	case p.MinInstances < 1:
		return nil, paramError("ddm", "min_instances", p.MinInstances, "must be ≥ 1")
	case !(p.Warning > 0) || !(p.Drift > p.Warning):
		return nil, paramError("ddm", "warning/drift", []float64{p.Warning, p.Drift}, "need 0 < warning < drift")
	}
	d := &ddm{p: p}
	d.reset()
	return d, nil
}

func (d *ddm) Name() string { return "ddm" }

func (d *ddm) reset() {
	d.n, d.rate = 0, 1 // MOA starts the rate at 1: the first value replaces it
	d.pMin, d.sMin = math.MaxFloat64, math.MaxFloat64
}

func (d *ddm) Add(x float64) State {
	d.n++
	d.rate += (x - d.rate) / float64(d.n)
	s := math.Sqrt(d.rate * (1 - d.rate) / float64(d.n))
	if d.n+1 < int64(d.p.MinInstances) {
		return Stable
	}
	if d.rate+s <= d.pMin+d.sMin {
		d.pMin, d.sMin = d.rate, s
	}
	switch {
	case d.n+1 > int64(d.p.MinInstances) && d.rate+s > d.pMin+float64(d.p.Drift*d.sMin):
		d.reset()
		return Drift
	case d.rate+s > d.pMin+float64(d.p.Warning*d.sMin):
		return Warning
	}
	return Stable
}

func (d *ddm) state() ([]*int64, []*float64) {
	return []*int64{&d.n}, []*float64{&d.rate, &d.pMin, &d.sMin}
}

func (d *ddm) MarshalBinary() ([]byte, error)        { return marshalFixed(d) }
func (d *ddm) AppendBinary(b []byte) ([]byte, error) { return appendFixed(b, d) }
func (d *ddm) UnmarshalBinary(b []byte) error        { return unmarshalFixed(d, b) }

// EDDMParams configure EDDM.
type EDDMParams struct {
	// MinErrors is the number of mistakes before any verdict (30).
	MinErrors int `json:"min_errors"`
	// Alpha and Beta are the warning and drift levels of the ratio
	// (p'+2s')/(p'+2s')_max (0.95 and 0.90).
	Alpha float64 `json:"alpha"`
	Beta  float64 `json:"beta"`
}

// eddm is the Early Drift Detection Method of Baena-García, del
// Campo-Ávila, Fidalgo, Bifet, Gavaldà & Morales-Bueno (2006), value for
// value as MOA's EDDM (TestDetectorsMatchMOA). It watches the distance (in
// values) between consecutive mistakes (values equal to 1): their mean p'
// and standard deviation s', and the largest p' + 2s' seen after the first
// 30 values. When mistakes come closer together, the ratio
// (p'+2s')/(p'+2s')_max falls: after more than MinErrors mistakes, below
// Alpha it warns (until the next mistake), below Beta it signals a drift and
// restarts. Slow gradual drifts show in the distances before they show in
// the error rate. Only mistakes move it: the service refuses it on a
// real-valued signal, where it would never alert.
type eddm struct {
	p               EDDMParams
	t, lastError    int64 // values since the restart; the last mistake's place
	errors          int64
	mean, m2, maxMS float64
	warn            int64 // 1 while in the warning zone
}

// eddmMinValues is the number of values before EDDM's maximum moves (MOA's).
const eddmMinValues = 30

func buildEDDM(raw json.RawMessage) (Detector, error) {
	p := EDDMParams{MinErrors: 30, Alpha: 0.95, Beta: 0.90}
	if err := decodeParams("eddm", raw, &p); err != nil {
		return nil, err
	}
	switch {
	case p.MinErrors < 2:
		return nil, paramError("eddm", "min_errors", p.MinErrors, "must be ≥ 2")
	case !(0 < p.Beta && p.Beta < p.Alpha && p.Alpha < 1):
		return nil, paramError("eddm", "alpha/beta", []float64{p.Alpha, p.Beta}, "need 0 < beta < alpha < 1")
	}
	return &eddm{p: p}, nil
}

func (d *eddm) Name() string { return "eddm" }

func (d *eddm) Add(x float64) State {
	d.t++
	if x != 1 {
		return d.verdict()
	}
	d.warn = 0
	d.errors++
	dist := float64(d.t - d.lastError)
	d.lastError = d.t
	old := d.mean // Welford, in MOA's order
	d.mean += (dist - d.mean) / float64(d.errors)
	d.m2 += (dist - d.mean) * (dist - old)
	ms := d.mean + 2*math.Sqrt(d.m2/float64(d.errors))
	warm := d.t+1 > eddmMinValues && d.errors > int64(d.p.MinErrors)
	switch {
	case ms > d.maxMS:
		if d.t+1 > eddmMinValues {
			d.maxMS = ms
		}
	case warm && ms/d.maxMS < d.p.Beta:
		*d = eddm{p: d.p}
		return Drift
	case warm && ms/d.maxMS < d.p.Alpha:
		d.warn = 1
	}
	return d.verdict()
}

// verdict is Warning while the last mistake left EDDM in its warning zone.
func (d *eddm) verdict() State {
	if d.warn == 1 {
		return Warning
	}
	return Stable
}

func (d *eddm) state() ([]*int64, []*float64) {
	return []*int64{&d.t, &d.lastError, &d.errors, &d.warn}, []*float64{&d.mean, &d.m2, &d.maxMS}
}

func (d *eddm) MarshalBinary() ([]byte, error)        { return marshalFixed(d) }
func (d *eddm) AppendBinary(b []byte) ([]byte, error) { return appendFixed(b, d) }
func (d *eddm) UnmarshalBinary(b []byte) error        { return unmarshalFixed(d, b) }
