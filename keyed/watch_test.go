package keyed

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/driftstream/driftstream/drift"
	"github.com/driftstream/driftstream/internal/wire"
	"github.com/driftstream/driftstream/topics"
)

// verdictDetector says what it is told, whatever it is fed.
type verdictDetector struct {
	drift.Detector
	verdict drift.State
}

func (d *verdictDetector) Add(float64) drift.State { return d.verdict }

// A key is in warning while any of its detectors is: feeding another signal
// does not clear a warning, and the level follows the detectors.
func TestKeysInWarningFollowsEveryDetector(t *testing.T) {
	cfg := testSettings(t, "perceptron", "")
	cfg.Detectors = []DetectorSpec{{Detector: "ddm", Signal: SignalMistakes}, {Detector: "adwin", Signal: SignalQueries}}
	stats := &Totals{}
	m, err := New(cfg, nil, stats)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := m.NewState("k")
	if err != nil {
		t.Fatal(err)
	}
	mistakes, queries := &verdictDetector{verdict: drift.Warning}, &verdictDetector{verdict: drift.Stable}
	ks.watch.detectors = []drift.Detector{mistakes, queries}
	in := Input{Key: "k", Event: &topics.Event{ID: "e"}}
	for _, step := range []struct {
		signal string
		want   int64
	}{{SignalMistakes, 1}, {SignalQueries, 1}, {SignalScore, 1}} {
		m.feed(in, ks, step.signal, 1, time.Time{})
		if got := stats.KeysInWarning; got != step.want {
			t.Fatalf("after a %s value: %d keys in warning, want %d", step.signal, got, step.want)
		}
	}
	mistakes.verdict = drift.Stable
	m.feed(in, ks, SignalMistakes, 0, time.Time{})
	if got := stats.KeysInWarning; got != 0 {
		t.Fatalf("%d keys in warning once no detector warns", got)
	}
}

// A drift awaiting its alert (confirmed during a cooldown) is part of
// the key's state: the watch's codec round-trips it.
func TestPendingDriftRoundTrips(t *testing.T) {
	fresh := func() []drift.Detector {
		a, _ := drift.New("adwin", nil)
		h, _ := drift.New("hddm-a", nil)
		return []drift.Detector{a, h}
	}
	wt := &watch{detectors: fresh(), since: []int64{7, 9}, alerted: []bool{true, false}, pending: []bool{false, true}}
	b, err := encodeWatch(nil, wt)
	if err != nil {
		t.Fatal(err)
	}
	back := &watch{detectors: fresh(), since: make([]int64, 2), alerted: make([]bool, 2), pending: make([]bool, 2)}
	r := wire.NewReader(b, errors.New("bad"))
	decodeWatch(r, back)
	if r.Err != nil || !slices.Equal(back.pending, wt.pending) || !slices.Equal(back.alerted, wt.alerted) || !slices.Equal(back.since, wt.since) {
		t.Fatalf("watch round trip: %v %+v", r.Err, back)
	}
}
