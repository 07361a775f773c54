package experiments

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/driftstream/driftstream/backtest"
)

// Grid tunes one of an experiment's learners the way its paper did: every
// candidate parameter set runs on draws of the data that the evaluation never
// uses, and the one with the best mean accuracy replaces the learner's
// parameters before the evaluation.
type Grid struct {
	// Label names the experiment's learner to tune (its Spec label, or its
	// name when it has none).
	Label string
	// Params are the candidates, JSON objects.
	Params []string
}

// TuneDraws are the draws tuning runs on: seeds TuneDraws.First …
// First+Count−1 of the experiment's data, disjoint from the evaluated draws
// (seed … seed+repeats−1, seed 1 by default).
type TuneDraws struct {
	First uint64
	Count int
}

// Tuned returns the experiment with its tuned learners' parameters chosen
// on the tuning draws, and the Markdown that reports the grids, their
// accuracies and the choice. The evaluation's draws, seed … seed+repeats−1,
// must not meet the tuning draws (an error otherwise).
func (e Experiment) Tuned(ctx context.Context, seed uint64, repeats int, dataDir string, opts backtest.Options) (Experiment, string, error) {
	if len(e.Tune) == 0 {
		return e, "", nil
	}
	if repeats <= 0 {
		repeats = e.Repeats
	}
	lo, hi := e.TuneOn.First, e.TuneOn.First+uint64(e.TuneOn.Count)
	if e.TuneOn.Count < 1 || seed < hi && lo < seed+uint64(repeats) {
		return e, "", fmt.Errorf("%s: tuning draws %d…%d meet the evaluated draws %d…%d: choose another -seed", e.Name, lo, hi-1, seed, seed+uint64(repeats)-1)
	}
	data := strings.ReplaceAll(e.Data, "{data}", dataDir)
	learners, pairs := slices.Clone(e.Learners), slices.Clone(e.Pairs)
	var b strings.Builder
	fmt.Fprintf(&b, "Tuning, as the paper did, on separate draws (seeds %d–%d of the same stream; never evaluated), best mean accuracy:\n\n", lo, hi-1)
	b.WriteString("| learner | candidate | accuracy on the tuning draws | chosen |\n|---|---|---|---|\n")
	for _, g := range e.Tune {
		i := slices.IndexFunc(learners, func(s backtest.Spec) bool { return specName(s) == g.Label })
		if i < 0 {
			return e, "", fmt.Errorf("%s: tuning grid for %q, which is not one of its learners", e.Name, g.Label)
		}
		var cands []backtest.Spec
		for _, p := range g.Params {
			cands = append(cands, spec(learners[i].Name, p, p))
		}
		res, err := backtest.Compare(ctx, backtest.Config{Name: data, Data: backtest.SynthData(data, lo, nil), Learners: cands, Seed: lo,
			Repeats: e.TuneOn.Count, QueryRateTarget: e.QueryRateTarget, Options: backtest.Options{Points: 1, Progress: opts.Progress}})
		if err != nil {
			return e, "", fmt.Errorf("%s: tuning %s: %w", e.Name, g.Label, err)
		}
		best := 0
		for k, ls := range res.Summary.Learners {
			if ls.Accuracy > res.Summary.Learners[best].Accuracy {
				best = k
			}
		}
		for k, ls := range res.Summary.Learners {
			mark := ""
			if k == best {
				mark = "**chosen**"
			}
			fmt.Fprintf(&b, "| %s | `%s` | %.4f | %s |\n", g.Label, g.Params[k], ls.Accuracy, mark)
		}
		tuned := spec(learners[i].Name, g.Params[best], fmt.Sprintf("%s (tuned %s)", learners[i].Name, g.Params[best]))
		for k := range pairs { // the pairs name the tuned learner by its new label
			for side := range pairs[k] {
				if pairs[k][side] == g.Label {
					pairs[k][side] = specName(tuned)
				}
			}
		}
		learners[i] = tuned
	}
	e.Learners, e.Pairs = learners, pairs
	return e, b.String() + "\n", nil
}
