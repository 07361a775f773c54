package keyed

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/driftstream/driftstream/drift"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

// The signals a drift detector can watch, per key.
const (
	// SignalMistakes is the prequential mistakes: 1 for a wrong prediction,
	// 0 for a right one, fed when the label is known (inline or delayed).
	SignalMistakes = "mistakes"
	// SignalQueries is label-free: 1 when the learner asks for the event's
	// label (its own rule, or the margin rule), else 0. A selective sampler
	// asks more after a change.
	SignalQueries = "queries"
	// SignalScore is label-free: 1/(1+|score|), which rises when the
	// learner grows unsure of its predictions.
	SignalScore = "score"
)

// The actions on a confirmed drift.
const (
	OnDriftAlert = "alert" // emit the alert only
	OnDriftReset = "reset" // emit the alert and restart the key's learner
)

// MaxDetectors bounds Settings.Detectors (every detector on every signal fits).
const MaxDetectors = 16

// DetectorSpec is one drift detector run per key on one signal.
type DetectorSpec struct {
	Detector string          `json:"detector"`
	Signal   string          `json:"signal"`
	Params   json.RawMessage `json:"params,omitempty"`
}

// validateDetectors checks the specs and the drift settings.
func (c *Settings) validateDetectors() error {
	if len(c.Detectors) > MaxDetectors {
		return fmt.Errorf("%d drift detectors: at most %d", len(c.Detectors), MaxDetectors)
	}
	seen := map[string]bool{}
	for i, s := range c.Detectors {
		if seen[s.Detector+"/"+s.Signal] {
			return fmt.Errorf("drift detector %d: %s on %s twice: an alert names only the detector and the signal", i, s.Detector, s.Signal)
		}
		seen[s.Detector+"/"+s.Signal] = true
		switch s.Signal {
		case SignalMistakes, SignalQueries, SignalScore:
		default:
			return fmt.Errorf("drift detector %d (%s): signal %q: use %s, %s or %s", i, s.Detector, s.Signal, SignalMistakes, SignalQueries, SignalScore)
		}
		if _, err := drift.New(s.Detector, s.Params); err != nil {
			return fmt.Errorf("drift detector %d: %w", i, err)
		}
		if drift.Binary(s.Detector) && !c.binarySignal(s.Signal) {
			return fmt.Errorf("drift detector %d: %s counts mistakes (values of 1) and cannot work on the %s signal, which is real-valued here (%s): use adwin, page-hinkley or hddm-a on it",
				i, s.Detector, s.Signal, c.signalRange(s.Signal))
		}
	}
	switch c.OnDrift {
	case OnDriftAlert, OnDriftReset:
	default:
		return fmt.Errorf("on drift %q: use %s or %s", c.OnDrift, OnDriftAlert, OnDriftReset)
	}
	if c.AlertCooldown < 0 {
		return fmt.Errorf("alert cooldown %d: must be ≥ 0", c.AlertCooldown)
	}
	if !(c.AlertMinRise == NoMinRise || c.AlertMinRise >= 0 && c.AlertMinRise < 1) {
		return fmt.Errorf("alert minimum rise %v: must be in [0, 1), or NoMinRise (%v) for none", c.AlertMinRise, NoMinRise)
	}
	return nil
}

// binarySignal reports whether signal takes only the values 0 and 1 under
// this configuration: mistakes always, queries for a learner that samples
// (its own decision), never the score.
func (c *Settings) binarySignal(signal string) bool {
	switch signal {
	case SignalMistakes:
		return true
	case SignalQueries:
		info, err := learners.Lookup(c.Learner)
		return err == nil && info.Sampling
	}
	return false
}

// signalRange says what a real-valued signal's values are.
func (c *Settings) signalRange(signal string) string {
	if signal == SignalQueries {
		return fmt.Sprintf("learner %s does not sample, so the queries signal is the margin rule's probability b/(b+|score|)", c.Learner)
	}
	return "1/(1+|score|)"
}

// DefaultAlertCooldown is how many of a key's events without a detection
// close its incident (Settings.AlertCooldown), when its signal has not
// come back near its reference before.
const DefaultAlertCooldown = 500

// The signals' indexes in a watch's windows.
const (
	sigMistakes = iota
	sigQueries
	sigScore
	numSignals
)

func signalIndex(signal string) int {
	switch signal {
	case SignalMistakes:
		return sigMistakes
	case SignalQueries:
		return sigQueries
	}
	return sigScore
}

// watch is a key's drift watch: its detectors, the windows of the signals
// they watch, and its incidents.
type watch struct {
	detectors []drift.Detector
	signal    []int // each detector's signal index
	// Per detector: the key's events since its last alert (or the start),
	// and whether it has alerted.
	since   []int64
	alerted []bool
	// warns holds each detector's last verdict being a warning; the key is
	// in warning while any is (a level, not persisted: it restarts with the
	// worker, as Totals.KeysInWarning does).
	warns []bool
	// win holds the windows of the watched signals, and of the mistakes
	// always (an alert reports the key's mistake rates); nil for others.
	win [numSignals]*windows
	// incidents is the key's one incident, or one per detector
	// (IncidentPerDetector).
	incidents []incident
}

// newWatch builds a key's detectors with the Model's makers; nil when none
// are configured (one allocation less per key: every use checks). A watch
// of one detector, the default, is made with its State instead
// (stateWithWatch, oneWatch).
func (m *Model) newWatch() *watch {
	n := len(m.s.Detectors)
	if n == 0 {
		return nil
	}
	wt := &watch{}
	wt.win[sigMistakes] = new(windows)
	wt.detectors = make([]drift.Detector, n)
	for i, s := range m.s.Detectors {
		wt.detectors[i] = m.detectors[i].New()
		si := signalIndex(s.Signal)
		wt.signal = append(wt.signal, si)
		if wt.win[si] == nil {
			wt.win[si] = new(windows)
		}
	}
	wt.since, wt.alerted, wt.warns = make([]int64, n), make([]bool, n), make([]bool, n)
	wt.incidents = make([]incident, 1)
	if m.s.IncidentPerDetector {
		wt.incidents = make([]incident, n)
	}
	return wt
}

// oneWatch makes o the watch of the model's one detector (Settings.Detectors
// of length 1) and returns it.
func (m *Model) oneWatch(o *oneWatch) *watch {
	wt := &o.watch
	wt.detectors, wt.signal, wt.since, wt.alerted, wt.warns, wt.incidents = o.detector[:], o.signal[:], o.since[:], o.alerted[:], o.warns[:], o.incident[:]
	wt.detectors[0], wt.signal[0] = m.detectors[0].New(), signalIndex(m.s.Detectors[0].Signal)
	wt.win[sigMistakes] = &o.win[0]
	if s := wt.signal[0]; s != sigMistakes {
		wt.win[s] = new(windows)
	}
	return wt
}

// oneWatch is a watch of one detector with what its slices and the
// mistakes' windows point into, allocated together, and with the key's
// State (stateWithWatch): eight allocations fewer for a new key (a
// million new keys are a million of them).
type oneWatch struct {
	watch
	detector       [1]drift.Detector
	signal         [1]int
	since          [1]int64
	alerted, warns [1]bool
	incident       [1]incident
	win            [1]windows // the mistakes' (another signal's are allocated apart)
}

// incidentOf is detector i's incident.
func (wt *watch) incidentOf(i int) *incident {
	if len(wt.incidents) == 1 {
		return &wt.incidents[0]
	}
	return &wt.incidents[i]
}

// outcome records a scored prediction of the key and feeds the mistakes
// signal.
func (m *Model) outcome(in Input, ks *State, wrong bool, ts time.Time) {
	if ks.watch == nil {
		return
	}
	m.feed(in, ks, sigMistakes, boolValue(wrong), ts)
	m.settle(in, ks, ts)
}

// tick counts an event of the key for its detectors and its incidents,
// before the event's signals are fed: the event of an alert is not one
// "after" it.
func (ks *State) tick() {
	if ks.watch == nil {
		return
	}
	for i := range ks.watch.since {
		ks.watch.since[i]++
	}
	for i := range ks.watch.incidents {
		ks.watch.incidents[i].quiet++
	}
}

// eventSignals feeds an event's label-free signals: asked is the query
// decision (0 or 1) or probability, score the prediction's margin.
func (m *Model) eventSignals(in Input, ks *State, asked, score float64, ts time.Time) {
	if ks.watch == nil {
		return
	}
	m.feed(in, ks, sigQueries, asked, ts)
	m.feed(in, ks, sigScore, 1/(1+math.Abs(score)), ts)
	m.settle(in, ks, ts)
}

// feed gives x, a value of signal si, to its windows and its detectors; a
// detection opens an incident or joins the open one (detected).
func (m *Model) feed(in Input, ks *State, si int, x float64, ts time.Time) {
	wt := ks.watch
	if wt.win[si] == nil {
		return // not watched
	}
	block := wt.win[si].add(x)
	for i := range wt.incidents {
		if inc := &wt.incidents[i]; inc.phase != incidentNone {
			inc.seen[si]++
			// A candidate is measured again at each block's end: a few
			// tests of a rise over its life, not one per value.
			if block && inc.phase == incidentCandidate && inc.rising&(1<<si) != 0 {
				m.measureCandidate(in, ks, inc, si, ts)
			}
		}
	}
	was := slices.Contains(wt.warns, true)
	for i, d := range wt.detectors {
		if wt.signal[i] != si {
			continue
		}
		state := d.Add(x)
		wt.warns[i] = state == drift.Warning
		if state == drift.Drift {
			m.detected(in, ks, i, ts)
		}
	}
	switch now := slices.Contains(wt.warns, true); {
	case now && !was:
		m.stats.KeysInWarning++
	case was && !now:
		m.stats.KeysInWarning--
	}
}

// detected handles detector i's confirmed drift: it joins the open
// incident; else it makes a candidate (or extends the current one, which
// keeps the reference frozen at its first detection), opened with an
// alert as soon as the signal's recent mean rose by AlertMinRise above
// that reference (measureCandidate): at once, or as the change goes on.
func (m *Model) detected(in Input, ks *State, i int, ts time.Time) {
	wt := ks.watch
	inc := wt.incidentOf(i)
	switch inc.phase {
	case incidentOpen:
		inc.detections++
		inc.quiet = 0
		inc.raise(wt)
		m.stats.DetectionsAbsorbed++
		return
	case incidentCandidate:
		inc.detections++
		inc.quiet = 0
		inc.mark(wt, i)
	default:
		inc.begin(wt, i)
		if _, r, ok := inc.rise(wt, wt.signal[i]); !ok && r.referenceN < minWindow && m.s.AlertMinRise != NoMinRise {
			inc.close(wt) // too young a key to have a reference
			m.stats.DetectionsBelowRise++
			return
		}
	}
	m.measureCandidate(in, ks, inc, wt.signal[i], ts)
}

// measureCandidate opens the candidate incident inc when the recent mean
// of signal s, one its detections watch, rose at least AlertMinRise above
// the reference frozen at its first detection (at once with NoMinRise); the
// alert names the last detector that confirmed a drift on s. A candidate
// with no detection for AlertCooldown events is dropped by settle.
func (m *Model) measureCandidate(in Input, ks *State, inc *incident, s int, ts time.Time) {
	up, r, ok := inc.rise(ks.watch, s)
	if m.s.AlertMinRise == NoMinRise || ok && up >= m.s.AlertMinRise && r.significant() {
		inc.detector = int(inc.by[s])
		m.open(in, ks, inc, ts, r)
	}
}

// open opens the candidate incident inc with an alert at in (and, with
// OnDriftReset, restarts the key's learner).
func (m *Model) open(in Input, ks *State, inc *incident, ts time.Time, r rise) {
	wt := ks.watch
	i := inc.detector
	inc.phase, inc.opened, inc.quiet = incidentOpen, in.Offset, 0
	inc.raise(wt)
	m.stats.DetectionsAbsorbed += inc.detections - 1 // the candidate's later detections
	msg := m.alertRecord(in, ks, i, ts, r)
	msg.Kind = topics.AlertOpened
	m.step.Alerts = append(m.step.Alerts, msg)
	m.stats.Alerts++
	m.stats.AlertsBy[i]++
	wt.since[i], wt.alerted[i] = 0, true
	rare := ks.stats.rareForUpdate()
	rare.alertDetector, rare.alertOffset, rare.alertTimestamp = i+1, in.Offset, 0
	if !ts.IsZero() {
		rare.alertTimestamp = ts.UnixNano()
	}
	if m.s.OnDrift == OnDriftReset {
		if l, err := m.newLearner(in.Key); err == nil {
			ks.learner, ks.mix = l, nil // a new key's: it follows the population again
			m.stats.Resets++
			rare.resets++
		}
	}
}

// settle closes the key's open incidents whose signals came back near
// their references, or that had no detection for AlertCooldown events
// while no signal still rose (a signal still climbing keeps its incident
// open: a gradual change is one incident), with a resolved record when
// AlertResolved asks for one; and drops the candidates with no detection
// for AlertCooldown events.
func (m *Model) settle(in Input, ks *State, ts time.Time) {
	wt := ks.watch
	for j := range wt.incidents {
		inc := &wt.incidents[j]
		switch {
		case inc.phase == incidentCandidate && inc.quiet >= m.s.AlertCooldown:
			m.stats.DetectionsBelowRise += inc.detections
			inc.close(wt)
			continue
		case !inc.open():
			continue
		case inc.recovered(wt, m.s.AlertMinRise):
		case inc.quiet < m.s.AlertCooldown:
			continue
		case !inc.settled(wt, m.s.AlertMinRise):
			inc.quiet = 0 // still rising
			continue
		}
		m.stats.IncidentsResolved++
		if m.s.AlertResolved {
			s := wt.signal[inc.detector]
			r := wt.win[s].measure()
			r.reference = inc.ref[s] // the level it came back near (or left behind)
			msg := m.alertRecord(in, ks, inc.detector, ts, r)
			opened := inc.opened
			msg.Kind, msg.Detections, msg.OpenedOffset = topics.AlertResolved, inc.detections, &opened
			m.step.Alerts = append(m.step.Alerts, msg)
		}
		inc.close(wt)
	}
}

// alertRecord is the record of detector i's incident at in: the rise r of
// its signal, and the key's mistake rates over the same windows.
func (m *Model) alertRecord(in Input, ks *State, i int, ts time.Time, r rise) topics.DriftAlert {
	wt := ks.watch
	s := m.s.Detectors[i]
	msg := topics.DriftAlert{Key: in.Key, KeyB64: topics.KeyB64(in.Key), Partition: in.Partition, Offset: in.Offset, ID: in.Event.ID, Detector: s.Detector, Signal: s.Signal,
		EventsSinceLastAlert: wt.sinceKeyAlert(), Action: m.s.OnDrift, Detections: 1,
		Recent: r.recent, Reference: r.reference, RecentN: r.recentN, ReferenceN: r.referenceN, MinRise: m.s.AlertMinRise}
	if !ts.IsZero() {
		t := ts.UTC().Format(time.RFC3339Nano)
		msg.TS = &t
	}
	mr := wt.win[sigMistakes].measure()
	if wt.signal[i] == sigMistakes {
		mr = r // the rise itself: its reference is the one frozen at the first detection
	}
	if mr.referenceN > 0 {
		msg.MistakeRateBefore = &mr.reference
	}
	if mr.recentN > 0 {
		msg.MistakeRateAfter = &mr.recent
	}
	return msg
}

// Release takes ks out of Totals.KeysInWarning if it is in warning: the
// holder calls it when the state leaves memory (evicted to the key store,
// replaced by a record), and a reset does. The level is not persisted, so
// the state that comes back, if any, starts out of warning.
func (m *Model) Release(ks *State) {
	if ks != nil && ks.watch != nil && slices.Contains(ks.watch.warns, true) {
		m.stats.KeysInWarning--
	}
}

// sinceKeyAlert is the key's events since its last alert, by any detector
// (since it was first seen, when it never alerted).
func (wt *watch) sinceKeyAlert() int64 {
	n, any := int64(0), false
	for j := range wt.since {
		if wt.alerted[j] && (!any || wt.since[j] < n) {
			n, any = wt.since[j], true
		}
	}
	if !any && len(wt.since) > 0 {
		return wt.since[0] // every detector counts from the key's start
	}
	return n
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Detectors are the key's drift detectors, in Settings.Detectors order
// (nil without any): to read. The slice is the key's own, so that a test
// can put a scripted detector in a slot; nothing else may write to it.
func (ks *State) Detectors() []drift.Detector {
	if ks.watch == nil {
		return nil
	}
	return ks.watch.detectors
}
