package backtest

import (
	"encoding/json"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// Detection scores a drift detector's alerts against a stream's known
// drift points: a drift is found by the first alert at or after it and
// before the next one (the delay is the distance); every other alert — before
// the first drift, or a second one between two drifts — is a false alarm.
type Detection struct {
	Name        string  `json:"name"`
	Drifts      int     `json:"drifts"`
	Found       int     `json:"found"`
	MedianDelay float64 `json:"median_delay"`
	P90Delay    float64 `json:"p90_delay"`
	FalseAlarms int     `json:"false_alarms"`
	// FalsePer10k is false alarms per 10,000 events.
	FalsePer10k float64 `json:"false_alarms_per_10k"`
	delays      []float64
	events      int
}

// MarshalJSON writes the delays as null when nothing was found.
func (d Detection) MarshalJSON() ([]byte, error) {
	type plain Detection
	num := func(v float64) any {
		if math.IsNaN(v) {
			return nil
		}
		return v
	}
	return json.Marshal(struct {
		plain
		MedianDelay any `json:"median_delay"`
		P90Delay    any `json:"p90_delay"`
	}{plain(d), num(d.MedianDelay), num(d.P90Delay)})
}

// ScoreAlerts scores alerts (event indexes, ascending) against drifts
// (event indexes, ascending) over a stream of events events.
func ScoreAlerts(name string, alerts, drifts []int, events int) Detection {
	d := Detection{Name: name, Drifts: len(drifts), events: events}
	found := map[int]bool{}
	for _, a := range alerts {
		k, _ := slices.BinarySearch(drifts, a+1) // drifts[k-1] ≤ a < drifts[k]
		k--
		switch {
		case k < 0, found[k]: // before any drift, or a second alert for one
			d.FalseAlarms++
		default:
			found[k] = true
			d.delays = append(d.delays, float64(a-drifts[k]))
		}
	}
	d.finish()
	return d
}

// Add pools another run of the same detector.
func (d *Detection) Add(o Detection) {
	d.Drifts += o.Drifts
	d.FalseAlarms += o.FalseAlarms
	d.delays = append(d.delays, o.delays...)
	d.events += o.events
	d.finish()
}

func (d *Detection) finish() {
	d.Found = len(d.delays)
	d.MedianDelay, d.P90Delay = math.NaN(), math.NaN()
	if len(d.delays) > 0 {
		sorted := slices.Clone(d.delays)
		slices.Sort(sorted)
		d.MedianDelay = stat.Quantile(0.5, stat.Empirical, sorted, nil)
		d.P90Delay = stat.Quantile(0.9, stat.Empirical, sorted, nil)
	}
	if d.events > 0 {
		d.FalsePer10k = float64(d.FalseAlarms) / float64(d.events) * 10000
	}
}
