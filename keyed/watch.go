package keyed

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
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

// DefaultAlertCooldown is the number of a key's events after an alert
// during which the key raises no other: one drift, one alert.
const DefaultAlertCooldown = 500

// recentOutcomes is how many of a key's last outcomes give the mistake
// rate after a drift.
const recentOutcomes = 64

// watch is a key's drift watch: its detectors, and what an alert reports.
type watch struct {
	detectors []drift.Detector
	// Per detector: the key's events since its last alert (or the start),
	// whether it has alerted (then its cooldown applies), and whether it
	// confirmed a drift during a cooldown, alerted when the cooldown ends.
	since   []int64
	alerted []bool
	pending []bool
	// warns holds each detector's last verdict being a warning; the key is
	// in warning while any is (a level, not persisted: it restarts with the
	// worker, as Totals.KeysInWarning does).
	warns []bool
	// Labeled events and mistakes since the key's last alert (or the start).
	labeled, mistakes int64
	// The last recentOutcomes outcomes, newest in bit 0 (1: wrong).
	recent  uint64
	recentN int
}

// newWatch builds a key's detectors; nil when none are configured (one
// allocation less per key: every use checks).
func (m *Model) newWatch() (*watch, error) {
	if len(m.s.Detectors) == 0 {
		return nil, nil
	}
	wt := &watch{}
	for _, s := range m.s.Detectors {
		d, err := drift.New(s.Detector, s.Params)
		if err != nil {
			return nil, err
		}
		wt.detectors = append(wt.detectors, d)
	}
	wt.since = make([]int64, len(wt.detectors))
	wt.alerted = make([]bool, len(wt.detectors))
	wt.pending = make([]bool, len(wt.detectors))
	wt.warns = make([]bool, len(wt.detectors))
	return wt, nil
}

// outcome records a scored prediction of the key and feeds the mistakes
// signal.
func (m *Model) outcome(in Input, ks *State, wrong bool, ts time.Time) {
	if len(m.s.Detectors) == 0 {
		return // nothing watches: the alert's rates are never read
	}
	wt := ks.watch
	wt.labeled++
	wt.recent <<= 1
	if wrong {
		wt.mistakes++
		wt.recent |= 1
	}
	wt.recentN = min(wt.recentN+1, recentOutcomes)
	m.feed(in, ks, SignalMistakes, boolValue(wrong), ts)
}

// tick counts an event of the key for its detectors' cooldowns, before the
// event's signals are fed: the event of an alert is not one "after" it.
func (ks *State) tick() {
	if ks.watch == nil {
		return
	}
	for i := range ks.watch.since {
		ks.watch.since[i]++
	}
}

// eventSignals feeds an event's label-free signals: asked is the query
// decision (0 or 1) or probability, score the prediction's margin.
func (m *Model) eventSignals(in Input, ks *State, asked, score float64, ts time.Time) {
	if ks.watch == nil {
		return
	}
	wt := ks.watch
	// A drift confirmed during a cooldown is alerted at the first event
	// after it: none is lost (the detector restarted when it confirmed it).
	for i := range wt.pending {
		if wt.pending[i] && !m.cooling(wt, i) {
			wt.pending[i] = false
			m.alert(in, ks, i, ts)
		}
	}
	m.feed(in, ks, SignalQueries, asked, ts)
	m.feed(in, ks, SignalScore, 1/(1+math.Abs(score)), ts)
}

// feed gives x to the key's detectors of signal; a confirmed drift outside
// the cooldown becomes an alert (and, with OnDriftReset, a new learner).
func (m *Model) feed(in Input, ks *State, signal string, x float64, ts time.Time) {
	wt := ks.watch
	was := slices.Contains(wt.warns, true)
	for i, s := range m.s.Detectors {
		if s.Signal != signal {
			continue
		}
		state := wt.detectors[i].Add(x)
		wt.warns[i] = state == drift.Warning
		switch {
		case state != drift.Drift:
		case m.cooling(wt, i):
			wt.pending[i] = true // alerted when the cooldown ends
		default:
			wt.pending[i] = false
			m.alert(in, ks, i, ts)
		}
	}
	switch now := slices.Contains(wt.warns, true); {
	case now && !was:
		m.stats.KeysInWarning++
	case was && !now:
		m.stats.KeysInWarning--
	}
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

// cooling reports whether detector i must stay quiet: the key (or, with
// CooldownPerDetector, detector i itself) alerted fewer than AlertCooldown
// events ago.
func (m *Model) cooling(wt *watch, i int) bool {
	for j := range wt.since {
		if (j == i || !m.s.CooldownPerDetector) && wt.alerted[j] && wt.since[j] < m.s.AlertCooldown {
			return true
		}
	}
	return false
}

func (m *Model) alert(in Input, ks *State, i int, ts time.Time) {
	wt := ks.watch
	s := m.s.Detectors[i]
	msg := topics.DriftAlert{Key: in.Key, KeyB64: topics.KeyB64(in.Key), Partition: in.Partition, Offset: in.Offset, ID: in.Event.ID, Detector: s.Detector, Signal: s.Signal,
		EventsSinceLastAlert: wt.sinceKeyAlert(), Action: m.s.OnDrift}
	if !ts.IsZero() {
		t := ts.UTC().Format(time.RFC3339Nano)
		msg.TS = &t
	}
	recentWrong := int64(bits.OnesCount64(wt.recent & (1<<wt.recentN - 1)))
	if n := wt.labeled - int64(wt.recentN); n > 0 {
		v := float64(wt.mistakes-recentWrong) / float64(n)
		msg.MistakeRateBefore = &v
	}
	if wt.recentN > 0 {
		v := float64(recentWrong) / float64(wt.recentN)
		msg.MistakeRateAfter = &v
	}
	m.stats.Alerts++
	m.stats.AlertsBy[i]++
	m.step.Alerts = append(m.step.Alerts, msg)
	wt.since[i], wt.alerted[i] = 0, true
	wt.labeled, wt.mistakes = 0, 0
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
