// Package window keeps the accuracy of the last n labeled outcomes: the
// windowed accuracy that the backtest curves and the service's
// window_accuracy gauge both report.
package window

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
