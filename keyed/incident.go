package keyed

import "math"

// A key's drift alerts are incidents: a detection whose rise is large
// enough opens one with an alert; detections while it is open join it and
// raise nothing; it closes when the signal is back near the rate it had
// before, or after AlertCooldown of the key's events without a detection.

// The signals' windows: a signal's recent window is its last
// recentBlocks×blockLen values (and the block being filled), its
// reference window the refBlocks×blockLen values before them.
const (
	blockLen     = 32
	recentBlocks = 4
	refBlocks    = 16
	// RecentWindow and ReferenceWindow are the sizes of a signal's full
	// windows, in values (events, or labeled events for mistakes): an
	// alert compares the signal's mean over the first with the second's.
	RecentWindow    = recentBlocks * blockLen
	ReferenceWindow = refBlocks * blockLen
	// minWindow is the fewest values either window needs for a rise to be
	// measured: a key younger than that raises no alert.
	minWindow = 2 * blockLen
)

// DefaultAlertMinRise is the least rise of the alerting signal's mean
// from its reference window to its recent window for a detection to open
// an incident (Settings.AlertMinRise): chosen on the detection study's
// first seed, checked on a second (docs/DETECTION.md).
const DefaultAlertMinRise = 0.15

// NoMinRise as Settings.AlertMinRise lets every detection of a key with no
// open incident alert, whatever its rise.
const NoMinRise = -1.0

// windows holds one signal's recent values as sums of blocks of blockLen,
// so that a key keeps at most 87 bytes per signal in its checkpoint, not
// its 640 values (2 to 6 bytes while it has fewer than 32: only the blocks
// filled are written, key-state version 5). The
// windows are long enough that a rise is measured well (the recent mean of
// a rate near 0.5 over 128 values has a standard deviation of 0.044: a
// rise of 0.15 is 3.4 of them) and that the reference, 512 values before
// the recent ones, is the level before a change that a detector confirmed
// a few hundred values after it.
type windows struct {
	sums [recentBlocks + refBlocks]float32 // completed blocks, a ring: next is the oldest
	next uint8
	full uint8   // completed blocks held
	cur  float32 // the block being filled
	curN uint8
}

// add appends a value to the windows; it reports whether the value
// completed a block.
func (w *windows) add(x float64) bool {
	w.cur += float32(x)
	if w.curN++; w.curN < blockLen {
		return false
	}
	w.sums[w.next] = w.cur
	w.next = (w.next + 1) % uint8(len(w.sums))
	w.full = min(w.full+1, uint8(len(w.sums)))
	w.cur, w.curN = 0, 0
	return true
}

// block is the sum of the i-th newest completed block.
func (w *windows) block(i int) float32 {
	n := len(w.sums)
	return w.sums[(int(w.next)-1-i+2*n)%n]
}

// recent is the mean and size of the recent window.
func (w *windows) recent() (float64, int) {
	s, n := float64(w.cur), int(w.curN)
	for i := range min(int(w.full), recentBlocks) {
		s += float64(w.block(i))
		n += blockLen
	}
	return mean(s, n), n
}

// reference is the mean and size of the reference window.
func (w *windows) reference() (float64, int) {
	s, n := 0.0, 0
	for i := recentBlocks; i < int(w.full); i++ {
		s += float64(w.block(i))
		n += blockLen
	}
	return mean(s, n), n
}

func mean(s float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return s / float64(n)
}

// rise is a measured change of a signal: its means over the two windows.
type rise struct {
	recent, reference   float64
	recentN, referenceN int
}

// measure is the signal's rise now.
func (w *windows) measure() rise {
	var r rise
	r.recent, r.recentN = w.recent()
	r.reference, r.referenceN = w.reference()
	return r
}

// The phases of an incident.
const (
	incidentNone = iota
	// incidentCandidate: a detector confirmed a drift whose rise was not
	// yet measurable (the change had not filled the recent window); the
	// rise is measured again at each value of the signal against the
	// reference frozen at the detection, for RecentWindow values.
	incidentCandidate
	// incidentOpen: alerted; detections join it.
	incidentOpen
)

// incident is a key's drift incident (or, with IncidentPerDetector, one
// detector's): none, a candidate, or open.
type incident struct {
	phase uint8
	// detector is the index of the detector that opened it (or made the
	// candidate).
	detector int
	// detections counts the detections in it, the opening one included.
	detections int64
	// quiet counts the key's events since its last detection.
	quiet int64
	// opened is the offset of the record that opened it.
	opened int64
	// Per watched signal: ref is its reference mean at the first detection
	// (the level before the change, which a recovered signal is back near),
	// level its highest recent mean at a detection or when last found still
	// rising (a settled signal stopped rising past it), seen its values
	// since the first detection.
	ref, level [numSignals]float64
	refN       [numSignals]int64 // the size of the window ref was measured over
	seen       [numSignals]int64
	// rising marks the signals a detection of the candidate watches (bit
	// s), by[s] the last detector that confirmed a drift on signal s: the
	// candidate opens when any of them rose enough.
	rising uint8
	by     [numSignals]int8
	// floor is each signal's recent mean when the last incident closed
	// (hasFloor): for ReferenceWindow events after a close (quiet counts
	// them), a new candidate's reference is at least the floor, so that
	// the change the closed incident reported is not reported again from a
	// reference still holding the values before it.
	floor    [numSignals]float64
	hasFloor bool
}

func (in *incident) open() bool { return in.phase == incidentOpen }

// begin makes inc a candidate of detector i, freezing every watched
// signal's reference.
func (in *incident) begin(wt *watch, i int) {
	floor, useFloor := in.floor, in.hasFloor && in.quiet < ReferenceWindow
	*in = incident{phase: incidentCandidate, detector: i, detections: 1, floor: in.floor, hasFloor: in.hasFloor}
	for s, w := range wt.win {
		if w != nil {
			r := w.measure()
			in.ref[s], in.refN[s], in.level[s] = r.reference, int64(r.referenceN), r.recent
			if useFloor && floor[s] > in.ref[s] {
				in.ref[s] = floor[s]
			}
		}
	}
	in.mark(wt, i)
}

// mark adds detector i's signal to those the candidate measures.
func (in *incident) mark(wt *watch, i int) {
	s := wt.signal[i]
	in.rising |= 1 << s
	in.by[s] = int8(i)
}

// close ends the incident (or drops the candidate), keeping each signal's
// recent mean as the floor of the next candidate's reference.
func (in *incident) close(wt *watch) {
	*in = incident{hasFloor: true}
	for s, w := range wt.win {
		if w != nil {
			in.floor[s], _ = w.recent()
		}
	}
}

// rise is the rise of signal s from the incident's reference to its recent
// mean, and whether it can be measured (a recent window of minWindow
// values, a reference frozen from one).
func (in *incident) rise(wt *watch, s int) (float64, rise, bool) {
	r := wt.win[s].measure()
	r.reference, r.referenceN = in.ref[s], int(in.refN[s])
	return r.recent - r.reference, r, r.recentN >= minWindow && r.referenceN >= minWindow
}

// riseZ is how many standard errors a rise must also be: the difference
// of two windows' means of values in [0, 1] has at most the standard error
// of two Bernoulli means of their pooled rate, and a rise of 0.15 at rates
// near 0.5 is only 3.0 of them (one window in about 850 by chance).
const riseZ = 3.5

// significant reports whether the rise r.recent − r.reference is riseZ
// standard errors or more.
func (r rise) significant() bool {
	nr, nf := float64(r.recentN), float64(r.referenceN)
	p := (r.recent*nr + r.reference*nf) / (nr + nf)
	se := math.Sqrt(max(p*(1-p), 0) * (1/nr + 1/nf))
	return r.recent-r.reference >= riseZ*se
}

// recovered reports whether every watched signal is back within a quarter
// of the minimum rise of its reference, over recent windows filled since
// the first detection (the opening signal's at least), with no detection
// for a recent window's worth of events: a recovery that holds, not a
// dip of the recent mean.
func (in *incident) recovered(wt *watch, minRise float64) bool {
	if in.seen[wt.signal[in.detector]] < RecentWindow || in.quiet < RecentWindow {
		return false
	}
	for s, w := range wt.win {
		if w != nil && in.seen[s] >= RecentWindow {
			if r, _ := w.recent(); r > in.ref[s]+max(minRise, 0)/4 {
				return false
			}
		}
	}
	return true
}

// settled reports whether no watched signal rose past its level by a
// quarter of the minimum rise; the ones that did are still rising: their
// level moves up to their recent mean.
func (in *incident) settled(wt *watch, minRise float64) bool {
	ok := true
	for s, w := range wt.win {
		if w == nil {
			continue
		}
		if r, _ := w.recent(); r > in.level[s]+max(minRise, 0)/4 {
			in.level[s], ok = r, false
		}
	}
	return ok
}

// raise lifts every watched signal's level to its recent mean when higher
// (at a detection joined to the incident).
func (in *incident) raise(wt *watch) {
	for s, w := range wt.win {
		if w != nil {
			if r, _ := w.recent(); r > in.level[s] {
				in.level[s] = r
			}
		}
	}
}
