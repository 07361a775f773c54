// Package experiments is the catalog of reproductions of the five seed papers'
// experiments (docs/spec/ALGORITHMS.md §7–§10): each one names its stream, learners,
// parameters and repeats, runs through package backtest, and states the
// paper's own figures next to ours.
package experiments

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/driftstream/driftstream/backtest"
)

// Experiment is one reproduction.
type Experiment struct {
	Name string
	// Paper is the seed paper and figure or table reproduced.
	Paper string
	// Claim is what the paper reports, to compare with our figures.
	Claim string
	// Data is a synth: spec; each repeat re-draws it with seed + repeat.
	// "{data}" stands for the shared data directory.
	Data     string
	Learners []backtest.Spec
	Repeats  int
	// QueryRateTarget calibrates the samplers to one label budget (0 = off).
	QueryRateTarget float64
	// Table, when set, replaces the single-stream comparison: it runs its own
	// protocol over several data sets and returns a Markdown table.
	Table func(ctx context.Context, learners []backtest.Spec, dataDir string, seed uint64, progress func(string)) (string, error)
	// Protocol, for a Table, says how its figures were made (printed above it).
	Protocol string
	// Tune lists the learners the paper tuned, with their grids; TuneOn the
	// draws they are tuned on (see Tuned).
	Tune   []Grid
	TuneOn TuneDraws
	// Pairs are further differences the paper claims, as learner labels (a
	// spec's label, or its name when it has none; Tuned renames a tuned one)
	// [a, b]: reported as a − b paired by draw.
	Pairs [][2]string
	// MistakesAt lists rounds at which the report gives each learner's
	// cumulative mistakes; SwitchEvery, when set, is the target's switch
	// period, and the report gives each learner's mistakes just after and
	// just before the switches.
	MistakesAt  []int
	SwitchEvery int
}

// sopGrid and lasecGrid are the grids for the parameters seed 004 tuned on a
// separate draw without reporting values: a over five decades; b over five,
// each with c from 3b to 1000b (LASEC needs c > b).
var (
	sopGrid   = []string{`{"a":1}`, `{"a":10}`, `{"a":100}`, `{"a":1000}`, `{"a":10000}`}
	lasecGrid = func() []string {
		var g []string
		for _, b := range []float64{1, 10, 100, 1000, 10000} {
			for _, k := range []float64{3, 10, 100, 1000} {
				g = append(g, fmt.Sprintf(`{"b":%g,"c":%g}`, b, k*b))
			}
		}
		return g
	}()
)

func spec(name, params, label string) backtest.Spec {
	s := backtest.Spec{Name: name, Label: label}
	if params != "" {
		s.Params = json.RawMessage(params)
	}
	return s
}

// crammerLearners are the learners of seed 000 §6.
func crammerLearners() []backtest.Spec {
	return []backtest.Spec{
		spec("perceptron", "", ""),
		spec("modified-perceptron", "", ""),
		spec("modified-perceptron", `{"init":"random"}`, "modified (random start)"),
		spec("shifting-perceptron", `{"lambda":0.1}`, "shifting λ=0.1"),
		spec("shifting-perceptron", `{"lambda":0.01}`, "shifting λ=0.01"),
		spec("shifting-perceptron", `{"lambda":0.0001}`, "shifting λ=1e-4"),
		spec("budget-perceptron", `{"budget":300}`, "budget B=300"),
	}
}

// swinLearners are the learners of seed 002 §6.
func swinLearners() []backtest.Spec {
	return []backtest.Spec{
		spec("swin", `{"randomized":true}`, "swin randomized"),
		spec("swin", `{"randomized":true,"beta":0,"w0":0.04}`, "winnow randomized (β=0)"),
		spec("swin", "", "swin deterministic"),
		spec("swin", `{"beta":0,"w0":0.04}`, "winnow deterministic (β=0)"),
	}
}

// selectiveGrids tune the second-order samplers' ridge and drift as
// seed 004 did; each candidate's query parameter is calibrated to the
// experiment's query rate on the first tuning draw, as in the evaluation.
func selectiveGrids() []Grid {
	return []Grid{{Label: "sop-ss", Params: sopGrid}, {Label: "lasec-ss c=10", Params: lasecGrid}}
}

// selective are the selective samplers of seed 004 §5.
func selective() []backtest.Spec {
	return []backtest.Spec{
		spec("perceptron-ss", "", ""),
		spec("sop-ss", "", ""),
		spec("lasec-ss", `{"c":10}`, "lasec-ss c=10"),
		spec("bbq", "", ""),
		spec("bbq-i", "", ""),
	}
}

// Catalog lists the experiments in a stable order.
// odmDecayGrid is the decaying step's offset s₀ for the dynamic-ODM
// experiment: the first step after a (re)start is 1/(1+s₀), with λ = 1
// (L = 1 + 8‖x‖² at θ = 0.5: the first step stays under the stability
// bound 2/L for ‖x‖² up to 25 from s₀ = 100 on).
var odmDecayGrid = []string{
	`{"lambda":1,"schedule":"inv_t_offset","s0":100}`,
	`{"lambda":1,"schedule":"inv_t_offset","s0":300}`,
	`{"lambda":1,"schedule":"inv_t_offset","s0":1000}`,
	`{"lambda":1,"schedule":"inv_t_offset","s0":10000}`,
}

func Catalog() []Experiment {
	return []Experiment{
		{
			Name:  "crammer-random-d5",
			Paper: "Crammer, Mansour, Even-Dar, Vaughan 2010 (seed 000) §6, Figure 1 left: random drift, latent d = 5, D = 1000, T = 5000",
			Claim: "all four algorithms make 250–300 mistakes; Modified Perceptron worse for the first ~500 rounds, ≈4% fewer in total; Shifting ≈2% more; RBP identical until the budget fills, ≈1.2% more",
			Data:  "synth:latent-hyperplane?d=5&D=1000&T=5000&drift=random&sigma=0.1", Learners: crammerLearners(), Repeats: 100,
			MistakesAt: []int{100, 200, 500, 1000},
		},
		{
			Name:  "crammer-linear-d50",
			Paper: "Crammer et al. 2010 (seed 000) §6, Figure 1 right: linear drift, latent d = 50, D = 1000, T = 5000",
			Claim: "Modified Perceptron worse for the first ~500 rounds, ends ≈15% below the Perceptron; Shifting ≈4% above after 1000 rounds; RBP degrades once mistakes exceed the budget",
			Data:  "synth:latent-hyperplane?d=50&D=1000&T=5000&drift=linear&sigma=0.1&delta_scale=0.001", Learners: crammerLearners(), Repeats: 30,
			MistakesAt: []int{100, 200, 500, 1000},
		},
		{
			Name:     "crammer-dimension-sweep",
			Paper:    "Crammer et al. 2010 (seed 000) §6: mistakes against the latent dimension d = 5 … 500, random and linear drift, D = 1000, T = 5000",
			Claim:    "at d = 20 most algorithms make about 550 mistakes under random drift and about 400 under linear drift; the Modified Perceptron makes ~100 fewer than the Perceptron at d = 5; break-even latent dimension ≈ 15 (random) and ≈ 150 (linear)",
			Learners: crammerLearners(), Repeats: 5, Table: RunDimensionSweep,
			Protocol: "40 repeats per dimension and drift; mean mistakes over T = 5000, and the Modified Perceptron's difference to the Perceptron paired by draw",
		},
		{
			Name:  "moroshko-supervised",
			Paper: "Moroshko, Crammer 2014 (seed 004) §5, supervised: d = 50, T = 10,000, target switching every 500",
			Claim: "SOP best before the first switch; LASEC best overall (the paper tuned LASEC's b, c and SOP's a on a separate draw)",
			Data:  "synth:switching-gaussian?d=50&T=10000&period=500",
			Learners: []backtest.Spec{spec("perceptron", "", ""), spec("modified-perceptron", "", ""), spec("shifting-perceptron", "", ""),
				spec("budget-perceptron", `{"budget":500}`, "budget B=500"), spec("sop", "", ""), spec("lasec", "", "")},
			Repeats: 20,
			Tune:    []Grid{{Label: "sop", Params: sopGrid}, {Label: "lasec", Params: lasecGrid}}, TuneOn: TuneDraws{First: 101, Count: 5},
			Pairs:      [][2]string{{"lasec", "sop"}},
			MistakesAt: []int{500, 2000}, SwitchEvery: 500,
		},
		{
			Name:  "moroshko-selective-0.1",
			Paper: "Moroshko, Crammer 2014 (seed 004) §5, selective sampling at query rate ≈ 0.1",
			Claim: "LASEC-SS best overall; BBQ best before the first switch then degrades sharply because it stops querying; BBQ-I adapts better; at low query rates every method struggles",
			Data:  "synth:switching-gaussian?d=50&T=10000&period=500", Learners: selective(), Repeats: 10, QueryRateTarget: 0.1,
			Tune: selectiveGrids(), TuneOn: TuneDraws{First: 101, Count: 5},
			MistakesAt: []int{500, 1000, 2000}, SwitchEvery: 500,
		},
		{
			Name:  "moroshko-selective-0.4",
			Paper: "Moroshko, Crammer 2014 (seed 004) §5, selective sampling at query rate ≈ 0.4",
			Claim: "LASEC-SS best overall; SOP-SS drops after a switch and recovers later (the \"about half the labels\" claim is about the query rate 0.5: moroshko-query-curve)",
			Data:  "synth:switching-gaussian?d=50&T=10000&period=500", Learners: selective(), Repeats: 10, QueryRateTarget: 0.4,
			Tune: selectiveGrids(), TuneOn: TuneDraws{First: 101, Count: 5},
			MistakesAt: []int{500, 1000, 2000}, SwitchEvery: 500,
		},
		{
			Name:     "moroshko-query-curve",
			Paper:    "Moroshko, Crammer 2014 (seed 004) §5, Fig. 2(c) and 2(f): accuracy against the query rate, synthetic stream and USPS",
			Claim:    "LASEC-SS best at every query rate; with about half the labels (query rate 0.5) it comes close to fully supervised LASEC, on both streams",
			Learners: append(selective(), spec("lasec", "", "lasec (supervised)"), spec("perceptron", "", "perceptron (supervised)")),
			Repeats:  5, Table: RunQueryCurve,
			Protocol: "every sampler calibrated to each query-rate target on the first draw, then run on every draw; the supervised learners see every label",
		},
		{
			Name:  "moroshko-usps",
			Paper: "Moroshko, Crammer 2014 (seed 004) §5, USPS: train + test (9,298 images, 256 features), the positive digits re-drawn every 500 examples",
			Claim: "LASEC slightly above SOP, both second-order methods above the first-order ones (Shifting λ = 1e-4, RBP B = 1000; LASEC's b, c and SOP's a tuned on a separate draw)",
			Data:  "synth:drifting-classes?file={data}/usps/usps_train.csv.gz,{data}/usps/usps_test.csv.gz&period=500",
			Learners: []backtest.Spec{spec("perceptron", "", ""), spec("modified-perceptron", "", ""), spec("shifting-perceptron", `{"lambda":0.0001}`, "shifting λ=1e-4"),
				spec("budget-perceptron", `{"budget":1000}`, "budget B=1000"), spec("sop", "", ""), spec("lasec", "", "")},
			Repeats: 10,
			Tune:    []Grid{{Label: "sop", Params: sopGrid}, {Label: "lasec", Params: lasecGrid}}, TuneOn: TuneDraws{First: 101, Count: 5},
			Pairs:      [][2]string{{"lasec", "sop"}},
			MistakesAt: []int{500, 2000}, SwitchEvery: 500,
		},
		{
			Name:     "zhang-dodm-table",
			Paper:    "Zhang, Zhao, Jin 2020 (seed 003) Table 2: accuracy on drifting data sets, ten windows starting at k·T/50 of length 4T/5, mean ± std",
			Claim:    "D-ODM best on 17 of 20 data sets; Table 2's D-ODM figures for the ten sets whose data is here are Electricity 76.80, SEA 87.49, Usenet-1 68.98, 1CDT 99.98, 2CDT 95.99, 1CHT 99.90, 2CHT 90.05, 1CSurr 98.05, UG-2C-2D 95.99, hyperplane 89.29; its baselines (SVM variants, DWM, AdaBoost.OL) are not in driftstream — we compare D-ODM with ODM without restarts, the Perceptron and LASEC",
			Learners: []backtest.Spec{spec("dynamic-odm", "", ""), spec("odm", "", ""), spec("perceptron", "", ""), spec("lasec", "", "")},
			Repeats:  10, Table: RunODMTable,
			Protocol: "D-ODM's parameters tuned first on generated streams the table never evaluates, then the ten windows on every data set",
		},
		{
			Name:  "zhang-dodm-dynamic",
			Paper: "Zhang, Zhao, Jin 2020 (seed 003) Theorem 2 and §4: restarted candidates track abrupt changes that one ODM cannot, on a Gaussian stream whose target is re-drawn every 2,000 rounds (d = 10, T = 20,000)",
			Claim: "D-ODM adapts to each change where a fixed ODM cannot: its excess risk with K−1 abrupt changes is O((K²/T)·log(T/K)) without knowing K",
			Data:  "synth:switching-gaussian?d=10&T=20000&period=2000",
			Learners: []backtest.Spec{
				spec("dynamic-odm", `{"lambda":1,"schedule":"inv_t_offset","s0":100}`, "dynamic-odm, 1/(s+s₀)"),
				spec("odm", `{"lambda":1,"schedule":"inv_t_offset","s0":100}`, "odm, 1/(s+s₀)"),
				spec("dynamic-odm", "", "dynamic-odm, constant"),
				spec("odm", "", "odm, constant"),
			},
			Repeats: 10, SwitchEvery: 2000,
			Tune: []Grid{
				{Label: "dynamic-odm, 1/(s+s₀)", Params: odmDecayGrid},
				{Label: "odm, 1/(s+s₀)", Params: odmDecayGrid},
			},
			TuneOn: TuneDraws{First: 101, Count: 5},
			Pairs:  [][2]string{{"dynamic-odm, 1/(s+s₀)", "odm, 1/(s+s₀)"}, {"dynamic-odm, constant", "odm, constant"}},
		},
		{
			Name:    "mesterharm-bound",
			Paper:   "Mesterharm 2003 (seed 001) Theorem 1 and Corollary 11: tracking Winnow's mistake bound on shifting disjunctions (n = 100, λ = 100, attribute errors with probability 0.01 per round)",
			Claim:   "mistakes stay below the bound for every concept sequence; ALGORITHMS §9.3's check observed 252–403 mistakes against bounds of 528–709",
			Repeats: 5, Table: RunWinnowBound,
			Protocol: "one run per α and seed (5 seeds); mistakes against the bound computed from each run's own concept sequence",
		},
		{
			Name:     "auer-warmuth-switch-cost",
			Paper:    "Auer, Warmuth 1998 (seed 002) §6: the cost of a literal switched on against one switched off, on the shifting disjunction of auer-warmuth-swin",
			Claim:    "switching a literal on costs far more mistakes than switching one off",
			Learners: swinLearners(), Repeats: 10, Table: RunSwitchCost,
			Protocol: "10 draws; mistakes in the 1000 rounds after each switch, averaged per draw over the 4 additions (rounds 2000, 4000, 6000, 8000) and over the 5 removals (1000, 3000, …, 9000)",
		},
		{
			Name:    "mesterharm-real-valued",
			Paper:   "Mesterharm 2003 (seed 001) Theorem 1, Corollary 8 and Theorem 10 on real-valued drifting linear-threshold concepts (the paper has no experiments: its claims are bounds)",
			Claim:   "tracking Winnow's mistakes stay below Theorem 1's bound for real-valued inputs and margins δ < 1; transformation 1 with m = δ/v bounds them in terms of m instead of the smallest input value (Corollary 8); plain Winnow started at the same ε has a similar bound for a fixed concept (Theorem 10)",
			Repeats: 5, Table: RunWinnowRealValued,
			Protocol: "n = 100 attributes, each nonzero with probability 0.1; 3 target attributes of weight 1, one replaced every 1000 of T = 10,000 rounds; δ = 0.5; 5 draws; the bound from each draw's own λ, ζ, H(C) and noise N",
		},
		{
			Name:     "auer-warmuth-swin",
			Paper:    "Auer, Warmuth 1998 (seed 002) §6: shifting disjunction, n = 100, T = 10,000, a literal switched every 1000 rounds (reconstructed, ALGORITHMS §7.3)",
			Claim:    "Winnow without the floor does well on the first concept, then accumulates more and more mistakes as the schedule shifts; SWIN tracks; switching a literal on costs more than switching one off",
			Data:     "synth:shifting-disjunction?n=100&T=10000&period=1000&k0=4",
			Learners: swinLearners(), Repeats: 10,
		},
	}
}

// Lookup returns the experiment called name.
func Lookup(name string) (Experiment, error) {
	var names []string
	for _, e := range Catalog() {
		if e.Name == name {
			return e, nil
		}
		names = append(names, e.Name)
	}
	return Experiment{}, fmt.Errorf("unknown experiment %q; valid: %s", name, strings.Join(names, ", "))
}

// Config turns the experiment into a backtest comparison; repeats overrides
// the experiment's own count when > 0; dataDir replaces "{data}".
func (e Experiment) Config(seed uint64, repeats int, dataDir string, opts backtest.Options) backtest.Config {
	if repeats <= 0 {
		repeats = e.Repeats
	}
	data := strings.ReplaceAll(e.Data, "{data}", dataDir)
	return backtest.Config{
		Name: e.Name + " (" + data + ")", Learners: e.Learners, Seed: seed, Repeats: repeats,
		QueryRateTarget: e.QueryRateTarget, Options: opts, Data: backtest.SynthData(data, seed, nil),
	}
}

// TableMarkdown renders the section of a table experiment.
func (e Experiment) TableMarkdown(table, command string) string {
	return fmt.Sprintf("### %s\n\n%s\n\nCommand: `%s`\n\nPaper: %s.\n\nOurs (%s):\n\n%s", e.Name, e.Paper, command, e.Claim, e.Protocol, table)
}

// Markdown renders the experiment's section of docs/REPRODUCTION.md: the
// command, the paper's claim, the tuning (Tuned's report, when the paper
// tuned), our figures, and every learner's paired accuracy difference to
// the first one.
func (e Experiment) Markdown(res backtest.Result, command, tuning string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n%s\n\n", e.Name, e.Paper)
	fmt.Fprintf(&b, "Command: `%s`\n\n", command)
	fmt.Fprintf(&b, "Paper: %s.\n\n", e.Claim)
	b.WriteString(tuning)
	fmt.Fprintf(&b, "Ours (%d events, %d repeats, mean and 95%% interval):\n\n", res.Summary.Events, res.Summary.Repeats)
	b.WriteString("| learner | params | mistakes | accuracy | 95% interval | query rate |\n|---|---|---|---|---|---|\n")
	for _, ls := range res.Summary.Learners {
		fmt.Fprintf(&b, "| %s | `%s` | %.1f | %.4f | [%.4f, %.4f] | %.3f |\n", ls.Name, ls.Params, ls.Mistakes, ls.Accuracy, ls.AccuracyCI.Lo, ls.AccuracyCI.Hi, ls.QueryRate)
	}
	if len(res.Summary.Learners) > 1 && res.Summary.Repeats > 1 {
		first := res.Summary.Learners[0].Name
		fmt.Fprintf(&b, "\nAccuracy minus %s's, paired by draw (%d draws, 95%% interval):\n\n| learner | difference | 95%% interval | sign settled |\n|---|---|---|---|\n", first, res.Summary.Repeats)
		for i, ls := range res.Summary.Learners[1:] {
			d := res.PairedDifference(i+1, 0)
			fmt.Fprintf(&b, "| %s | %+.4f | [%+.4f, %+.4f] | %v |\n", ls.Name, d.Mean, d.Lo, d.Hi, d.Lo > 0 || d.Hi < 0)
		}
		for _, pr := range e.Pairs {
			named := func(name string) func(backtest.Spec) bool {
				return func(s backtest.Spec) bool { return specName(s) == name }
			}
			i, j := slices.IndexFunc(e.Learners, named(pr[0])), slices.IndexFunc(e.Learners, named(pr[1]))
			if i < 0 || j < 0 || i >= len(res.Runs) || j >= len(res.Runs) {
				continue
			}
			d := res.PairedDifference(i, j)
			fmt.Fprintf(&b, "\n%s minus %s, paired by draw: %+.4f [%+.4f, %+.4f] (sign settled: %v).\n", res.Summary.Learners[i].Name, res.Summary.Learners[j].Name, d.Mean, d.Lo, d.Hi, d.Lo > 0 || d.Hi < 0)
		}
	}
	if len(e.MistakesAt) > 0 {
		b.WriteString(mistakesAtTable(res, e.MistakesAt))
	}
	if e.SwitchEvery > 0 {
		b.WriteString(recoveryTable(res, e.SwitchEvery, e.SwitchEvery/5))
	}
	return b.String()
}
