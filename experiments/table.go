package experiments

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/streams"
)

// tableHeader writes a Markdown header: the leading columns, one per learner, a last one.
func tableHeader(b *strings.Builder, lead []string, specs []backtest.Spec, last string) {
	cols := append([]string(nil), lead...)
	for _, s := range specs {
		cols = append(cols, specName(s))
	}
	cols = append(cols, last)
	b.WriteString("| " + strings.Join(cols, " | ") + " |\n|" + strings.Repeat("---|", len(cols)) + "\n")
}

func specName(s backtest.Spec) string {
	if s.Label != "" {
		return s.Label
	}
	return s.Name
}

// RunDimensionSweep reproduces seed 000's sweep over the latent dimension:
// mistakes of each learner at d = 5 … 500, under random and linear drift
// (D = 1000, T = 5000), and the Modified Perceptron's difference to the
// Perceptron, whose sign change is the break-even dimension.
func RunDimensionSweep(ctx context.Context, learnersToRun []backtest.Spec, _ string, seed uint64, progress func(string)) (string, error) {
	const repeats = 5
	var b strings.Builder
	for _, drift := range []string{"random", "linear"} {
		fmt.Fprintf(&b, "\n%s drift (%d repeats; mean mistakes over T = 5000):\n\n", drift, repeats)
		tableHeader(&b, []string{"d"}, learnersToRun, "modified − perceptron")
		for _, d := range []int{5, 10, 20, 50, 100, 200, 500} {
			if progress != nil {
				progress(fmt.Sprintf("%s drift, d = %d", drift, d))
			}
			data := fmt.Sprintf("synth:latent-hyperplane?d=%d&D=1000&T=5000&drift=%s&sigma=0.1&delta_scale=0.001", d, drift)
			e := Experiment{Data: data, Learners: learnersToRun, Repeats: repeats}
			res, err := backtest.Compare(ctx, e.Config(seed, repeats, "", backtest.Options{Points: 1}))
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "| %d | ", d)
			m := map[string]float64{}
			for _, ls := range res.Summary.Learners {
				fmt.Fprintf(&b, "%.1f | ", ls.Mistakes)
				m[ls.Name] = ls.Mistakes
			}
			fmt.Fprintf(&b, "%+.1f |\n", m["modified-perceptron"]-m["perceptron"])
		}
	}
	return b.String(), nil
}

// RunWinnowBound checks tracking Winnow's exact Theorem 1 bound (ALGORITHMS
// §4.2) on generated shifting disjunctions with attribute errors: with
// disjunction bookkeeping δ = 1, H = 2Z⁺, ζ = 1 and noise N = 2A,
// M < (1 − ελ + α)/(2(1 − ελ)) · (H(ln α + ln(1/ε))/ln α + N).
func RunWinnowBound(ctx context.Context, _ []backtest.Spec, _ string, seed uint64, progress func(string)) (string, error) {
	const n, lambda = 100, 100.0
	settings := []struct{ alpha, eps float64 }{{2, 1 / (50 * lambda)}, {1.35, 1 / (35 * lambda)}}
	var b strings.Builder
	b.WriteString("| α | ε | seed | Z⁺ | Z⁻ | A | mistakes | Theorem 1 bound | holds |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, st := range settings {
		for k := uint64(0); k < 5; k++ {
			if progress != nil {
				progress(fmt.Sprintf("α = %v, seed %d", st.alpha, seed+k))
			}
			src, err := streams.OpenSynth("synth:shifting-disjunction?n=100&T=10000&period=1000&k0=4&p_attr=0.01", seed+k)
			if err != nil {
				return "", err
			}
			events, err := backtest.Load(ctx, src)
			if err != nil {
				return "", err
			}
			stats := src.(interface {
				Stats() streams.DisjunctionStats
			}).Stats()
			params := fmt.Sprintf(`{"alpha":%v,"epsilon":%v,"lambda":%v}`, st.alpha, st.eps, lambda)
			run, err := backtest.Evaluate(ctx, spec("tracking-winnow", params, ""), events, n, seed+k, backtest.Options{Points: 1})
			if err != nil {
				return "", err
			}
			el := st.eps * lambda
			H, N := 2*float64(stats.Additions), 2*float64(stats.AttributeErrors)
			bound := (1 - el + st.alpha) / (2 * (1 - el)) * (H*(math.Log(st.alpha)+math.Log(1/st.eps))/math.Log(st.alpha) + N)
			fmt.Fprintf(&b, "| %v | %.3g | %d | %d | %d | %d | %d | %.1f | %v |\n", st.alpha, st.eps, seed+k, stats.Additions, stats.Removals,
				stats.AttributeErrors, run.Mistakes, bound, float64(run.Mistakes) < bound)
		}
	}
	return b.String(), nil
}
