package keyed

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/drift"
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
		signal int
		want   int64
	}{{sigMistakes, 1}, {sigQueries, 1}, {sigScore, 1}} {
		m.feed(in, ks, step.signal, 1, time.Time{})
		if got := stats.KeysInWarning; got != step.want {
			t.Fatalf("after a value of signal %d: %d keys in warning, want %d", step.signal, got, step.want)
		}
	}
	mistakes.verdict = drift.Stable
	m.feed(in, ks, sigMistakes, 0, time.Time{})
	if got := stats.KeysInWarning; got != 0 {
		t.Fatalf("%d keys in warning once no detector warns", got)
	}
}

// The windows' means and sizes: the recent window is the block being
// filled and the four blocks before it, the reference window the sixteen
// before those; older blocks are dropped.
func TestWindowsMeanTheirValues(t *testing.T) {
	for _, tc := range []struct {
		name                string
		values              []float64
		recent, reference   float64
		recentN, referenceN int
	}{
		{"empty", nil, 0, 0, 0, 0},
		{"a partial block", repeat(1, 5), 1, 0, 5, 0},
		{"four blocks", repeat(0.5, 128), 0.5, 0, 128, 0},
		{"a reference block", append(repeat(0, 32), repeat(1, 128)...), 1, 0, 128, 32},
		{"full, and a partial", slices.Concat(repeat(1, 32), repeat(0, 512), repeat(1, 136)), 1, 0, 136, 512},
		{"the oldest dropped", slices.Concat(repeat(1, 992), repeat(0, 512), repeat(0.25, 128)), 0.25, 0, 128, 512},
	} {
		var w windows
		for _, v := range tc.values {
			w.add(v)
		}
		r := w.measure()
		if r.recent != tc.recent || r.reference != tc.reference || r.recentN != tc.recentN || r.referenceN != tc.referenceN {
			t.Errorf("%s: %+v, want recent %v over %d, reference %v over %d", tc.name, r, tc.recent, tc.recentN, tc.reference, tc.referenceN)
		}
	}
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// scripted says Drift at the listed calls of Add (1-based), Stable
// otherwise.
type scripted struct {
	drift.Detector
	calls int
	at    map[int]bool
}

func (d *scripted) Add(float64) drift.State {
	d.calls++
	if d.at[d.calls] {
		return drift.Drift
	}
	return drift.Stable
}

// incidentKey is a model watching mistakes with a scripted detector, and
// a key, fed outcomes by its tests.
type incidentKey struct {
	t     *testing.T
	m     *Model
	ks    *State
	det   *scripted
	stats *Totals
	off   int64
	got   []topics.DriftAlert
}

func newIncidentKey(t *testing.T, drifts []int, tune func(*Settings)) *incidentKey {
	cfg := testSettings(t, "perceptron", "")
	cfg.Detectors = []DetectorSpec{{Detector: "adwin", Signal: SignalMistakes}}
	if tune != nil {
		tune(&cfg)
	}
	adwin, err := drift.New("adwin", nil) // what the scripted detector writes to the key's state
	if err != nil {
		t.Fatal(err)
	}
	k := &incidentKey{t: t, stats: &Totals{}, det: &scripted{Detector: adwin, at: map[int]bool{}}}
	for _, d := range drifts {
		k.det.at[d] = true
	}
	if k.m, err = New(cfg, nil, k.stats); err != nil {
		t.Fatal(err)
	}
	if k.ks, err = k.m.NewState("k"); err != nil {
		t.Fatal(err)
	}
	k.ks.watch.detectors[0] = k.det
	return k
}

// events feeds n events of the key whose outcome is wrong with each
// probability in turn (deterministic: the share wrong in every block of
// 16 is rate's).
func (k *incidentKey) events(n int, rate float64) {
	for i := range n {
		k.m.step = Step{}
		in := Input{Key: "k", Offset: k.off, Event: &topics.Event{ID: "e"}}
		k.ks.tick()
		k.m.outcome(in, k.ks, float64(i%16) < rate*16, time.Time{})
		k.got = append(k.got, k.m.step.Alerts...)
		k.off++
	}
}

// One change, one alert: the detections after the first while the
// incident is open join it; the incident closes once the key's mistake
// rate is back near its reference, with a resolved record that counts
// them; the next rise opens another.
func TestOneChangeOneAlert(t *testing.T) {
	// Detections at the 250th outcome (the rise, 50 events in), the 300th
	// and the 400th (the same change, re-cut), then at the 1,500th (a second
	// rise, 100 events in).
	k := newIncidentKey(t, []int{250, 300, 400, 1500}, func(s *Settings) { s.AlertResolved = true })
	k.events(200, 0.125) // reference: 2 wrong in 16
	k.events(300, 0.5)   // the change: half wrong
	k.events(900, 0.125) // recovered
	k.events(300, 0.5)   // a second change
	if len(k.got) != 3 {
		t.Fatalf("%d records, want the first alert, its resolution and the second alert: %+v", len(k.got), k.got)
	}
	a, res, b := k.got[0], k.got[1], k.got[2]
	// The detection at 249 finds the rise too young to measure: the
	// candidate opens at the end of a block, once the recent window shows it.
	if a.Kind != topics.AlertOpened || a.Offset < 249 || a.Offset > 249+RecentWindow || (a.Offset+1)%blockLen != 0 || a.Detections != 1 || a.Reference != 0.125 ||
		a.Recent < 0.125+DefaultAlertMinRise || a.RecentN < RecentWindow || a.ReferenceN < minWindow || a.MinRise != DefaultAlertMinRise {
		t.Errorf("first alert %+v", a)
	}
	if res.Kind != topics.AlertResolved || res.Detections != 3 || res.OpenedOffset == nil || *res.OpenedOffset != a.Offset || res.Offset <= 500 || res.Offset > 500+RecentWindow+blockLen {
		t.Errorf("resolution %+v: want 3 detections, the incident opened at %d, closed within a recent window of the recovery at 500", res, a.Offset)
	}
	if b.Kind != topics.AlertOpened || b.Offset != 1499 {
		t.Errorf("second alert %+v", b)
	}
	if k.stats.Alerts != 2 || k.stats.DetectionsAbsorbed != 2 || k.stats.IncidentsResolved != 1 || k.stats.DetectionsBelowRise != 0 {
		t.Errorf("counters %+v", *k.stats)
	}
}

// A detection whose signal rose less than the minimum, or on a key too
// young to measure a rise, raises nothing and is counted; with NoMinRise
// every detection of a key with no incident open alerts.
func TestSmallRisesRaiseNoAlert(t *testing.T) {
	drifts := []int{20, 300, 600, 900}
	k := newIncidentKey(t, drifts, nil)
	k.events(1500, 0.25) // stationary: no rise at any detection; the last three are one candidate, dropped 500 events after the last
	if len(k.got) != 0 || k.stats.DetectionsBelowRise != 4 || k.stats.Alerts != 0 {
		t.Fatalf("stationary key: %d alerts, counters %+v", len(k.got), *k.stats)
	}
	k = newIncidentKey(t, drifts, func(s *Settings) { s.AlertMinRise = NoMinRise; s.AlertCooldown = 100 })
	k.events(1500, 0.25)
	if len(k.got) != 4 || k.stats.DetectionsBelowRise != 0 || k.stats.IncidentsResolved != 4 {
		t.Fatalf("without a minimum rise: %d alerts, counters %+v", len(k.got), *k.stats)
	}
}

// An incident whose signal stays high closes after AlertCooldown events
// without a detection (the key settled at a new level: its next change is
// measured from there), silently unless resolved records are asked for.
func TestIncidentClosesAfterItsCooldown(t *testing.T) {
	k := newIncidentKey(t, []int{250, 600, 1400}, nil)
	k.events(200, 0.0625)
	k.events(1800, 0.5) // a new, worse level: detections at 250 and 600 are one incident
	if len(k.got) != 1 || k.stats.DetectionsAbsorbed != 1 || k.stats.IncidentsResolved != 1 {
		t.Fatalf("%d alerts, counters %+v: want one incident, closed %d events after its last detection", len(k.got), *k.stats, DefaultAlertCooldown)
	}
	if k.stats.DetectionsBelowRise != 1 { // the detection at 1,400: no rise from the new level in the 500 events after it
		t.Fatalf("counters %+v", *k.stats)
	}
}

// An open incident, its windows and its detections are part of the key's
// state: a key restored in the middle of an incident raises what the
// uninterrupted one does.
func TestIncidentRoundTrips(t *testing.T) {
	drifts := []int{250, 300, 400, 1500}
	whole := newIncidentKey(t, drifts, func(s *Settings) { s.AlertResolved = true })
	whole.events(200, 0.125)
	whole.events(300, 0.5)
	whole.events(900, 0.125)
	whole.events(300, 0.5)

	k := newIncidentKey(t, drifts, func(s *Settings) { s.AlertResolved = true })
	k.events(200, 0.125)
	k.events(112, 0.5) // the incident is open (a multiple of 16 events: the outcomes' pattern goes on in step)
	b, err := k.ks.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := k.m.Decode(&checkpoint.KeyRecord{Key: "k", State: b})
	if err != nil {
		t.Fatal(err)
	}
	if !back.watch.incidents[0].open() || !reflect.DeepEqual(back.watch.win, k.ks.watch.win) {
		t.Fatalf("decoded watch %+v: want the open incident and the windows", back.watch)
	}
	back.watch.detectors[0] = k.det // the scripted detector goes on counting its calls
	k.ks = back
	k.events(188, 0.5)
	k.events(900, 0.125)
	k.events(300, 0.5)
	if !reflect.DeepEqual(k.got, whole.got) {
		t.Fatalf("restored mid-incident:\n%+v\nuninterrupted:\n%+v", k.got, whole.got)
	}
}
