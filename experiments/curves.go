package experiments

import (
	"fmt"
	"strings"

	"github.com/driftstream/driftstream/backtest"
)

// The notes under some reproductions quote figures read off the learning
// curves (mistakes by a given round, recovery after a switch). These tables
// print them from the runs themselves, so that every such figure comes from
// the experiment's command.

// cumulativeAt is the cumulative mistakes of a run by event e: those of the
// last curve point at or before e (curve points every n/500 events).
func cumulativeAt(r backtest.Run, e int) float64 {
	m := 0
	for _, p := range r.Curve {
		if p.Event > e {
			break
		}
		m = p.CumMistakes
	}
	return float64(m)
}

// meanOver averages f over a learner's runs.
func meanOver(runs []backtest.Run, f func(backtest.Run) float64) float64 {
	s := 0.0
	for _, r := range runs {
		s += f(r)
	}
	return s / float64(len(runs))
}

// mistakesAtTable is each learner's mean cumulative mistakes by the given
// rounds.
func mistakesAtTable(res backtest.Result, rounds []int) string {
	var b strings.Builder
	b.WriteString("\nCumulative mistakes by round (mean over draws, read from the curves at their nearest point at or before the round):\n\n| learner |")
	for _, r := range rounds {
		fmt.Fprintf(&b, " %d |", r)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(rounds)) + "\n")
	for i, ls := range res.Summary.Learners {
		fmt.Fprintf(&b, "| %s |", ls.Name)
		for _, r := range rounds {
			fmt.Fprintf(&b, " %.1f |", meanOver(res.Runs[i], func(run backtest.Run) float64 { return cumulativeAt(run, r) }))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// recoveryTable is, per learner, the mean mistakes in the first and in the
// last span rounds of every period after the first (the target switches at
// each multiple of period): how far a learner drops after a switch and how
// far it recovers before the next.
func recoveryTable(res backtest.Result, period, span int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nAfter each switch (every %d rounds, the first excepted), mistakes in the first and the last %d rounds of the period (mean over switches and draws, from the curves):\n\n| learner | first %d | last %d |\n|---|---|---|\n", period, span, span, span)
	for i, ls := range res.Summary.Learners {
		first := meanOver(res.Runs[i], func(run backtest.Run) float64 {
			s, n := 0.0, 0
			for start := period; start+period <= res.Summary.Events; start += period {
				s += cumulativeAt(run, start+span) - cumulativeAt(run, start)
				n++
			}
			return s / float64(n)
		})
		last := meanOver(res.Runs[i], func(run backtest.Run) float64 {
			s, n := 0.0, 0
			for start := period; start+period <= res.Summary.Events; start += period {
				s += cumulativeAt(run, start+period) - cumulativeAt(run, start+period-span)
				n++
			}
			return s / float64(n)
		})
		fmt.Fprintf(&b, "| %s | %.1f | %.1f |\n", ls.Name, first, last)
	}
	return b.String()
}
