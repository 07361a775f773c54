package backtest

import "testing"

func TestScoreAlerts(t *testing.T) {
	// Drifts at 100, 200, 300 in 400 events; alerts: one false (50), 120
	// finds the first (delay 20), 130 is a second alert for it (false), 310
	// finds the third (delay 10); the second drift is missed.
	d := ScoreAlerts("x", []int{50, 120, 130, 310}, []int{100, 200, 300}, 400)
	if d.Drifts != 3 || d.Found != 2 || d.FalseAlarms != 2 || d.MedianDelay != 10 || d.FalsePer10k != 50 {
		t.Fatalf("%+v", d)
	}
	d.Add(ScoreAlerts("x", []int{105}, []int{100}, 200))
	if d.Drifts != 4 || d.Found != 3 || d.FalseAlarms != 2 || d.FalsePer10k != 2.0/600*10000 {
		t.Fatalf("pooled %+v", d)
	}
}
