// Package window keeps statistics of the last n values of a stream: the
// accuracy of the last n labeled outcomes (the windowed accuracy that the
// backtest curves and the service's window_accuracy gauge both report), and
// the mean of the last n values in [0, 1].
package window

import "math"

// Accuracy is a ring of the last n outcomes.
type Accuracy struct {
	wrong                  []bool
	next, filled, mistakes int
}

// New returns a window of n ≥ 1 outcomes.
func New(n int) *Accuracy { return &Accuracy{wrong: make([]bool, max(n, 1))} }

// Add records one outcome, dropping the oldest once the window is full.
func (a *Accuracy) Add(wrong bool) {
	if a.filled == len(a.wrong) {
		if a.wrong[a.next] {
			a.mistakes--
		}
	} else {
		a.filled++
	}
	a.wrong[a.next] = wrong
	if wrong {
		a.mistakes++
	}
	a.next = (a.next + 1) % len(a.wrong)
}

// Len is the number of outcomes in the window.
func (a *Accuracy) Len() int { return a.filled }

// Value is the share of the window's outcomes that were right (0 when empty).
func (a *Accuracy) Value() float64 {
	if a.filled == 0 {
		return 0
	}
	return 1 - float64(a.mistakes)/float64(a.filled)
}

// Mean is a ring of the last n values in [0, 1], kept in millionths so that
// the running sum is exact however long the stream: its mean never drifts
// from the values in the window.
type Mean struct {
	micros       []int64
	next, filled int
	sum          int64
}

// NewMean returns a window of n ≥ 1 values.
func NewMean(n int) *Mean { return &Mean{micros: make([]int64, max(n, 1))} }

// Add records v (clamped to [0, 1], to the nearest millionth), dropping the
// oldest value once the window is full.
func (m *Mean) Add(v float64) {
	u := int64(math.Round(min(max(v, 0), 1) * 1e6))
	if m.filled == len(m.micros) {
		m.sum -= m.micros[m.next]
	} else {
		m.filled++
	}
	m.micros[m.next] = u
	m.sum += u
	m.next = (m.next + 1) % len(m.micros)
}

// Len is the number of values in the window.
func (m *Mean) Len() int { return m.filled }

// Value is the mean of the window's values (0 when empty).
func (m *Mean) Value() float64 {
	if m.filled == 0 {
		return 0
	}
	return float64(m.sum) / 1e6 / float64(m.filled)
}
