package streams

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/driftstream/driftstream/learners"
)

// generators is the catalog of built-in generators (docs/spec/ALGORITHMS.md §7).
func generators() []Generator {
	return []Generator{
		{Name: "latent-hyperplane", Summary: "seed 000: x = A·z with a drifting hyperplane target (random or linear drift)", build: latentHyperplane},
		{Name: "switching-gaussian", Summary: "seed 004: x ~ N(0, I), target re-drawn every period rounds", build: switchingGaussian},
		{Name: "shifting-disjunction", Summary: "seed 002: Boolean inputs, a monotone disjunction gaining and losing literals", build: shiftingDisjunction},
		{Name: "sea", Summary: "SEA concepts: f₁ + f₂ ≤ θ with θ switching 8, 9, 7, 9.5 and label noise", build: sea},
		{Name: "hyperplane", Summary: "rotating hyperplane (MOA): weights drift by mag_change per example", build: hyperplane},
		{Name: "drifting-classes", Summary: "a multiclass CSV file whose positive classes are re-drawn every period rows (the drifting-USPS stream)", build: driftingClasses},
		{Name: "population", Summary: "keyed: a shared drifting hyperplane plus each key's own deviation, Zipf key frequencies (issue 34)", build: population},
		{Name: "concept-drift", Summary: "gradual drift from one generator to another along a sigmoid (River); old.k=v and new.k=v set their parameters", build: conceptDrift},
	}
}

// rngStream returns the generator's random stream number id, so that each
// component (matrix, inputs, target, noise) draws independently.
func rngStream(seed, id uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, id)) }

// genSource turns a per-round function into a Source of T examples.
type genSource struct {
	dim  int
	t, T int
	next func(t int) ([]float64, int)
	// drifts are the rounds at which the concept changes, when known.
	drifts []int
}

func (g *genSource) Dim() int { return g.dim }

// DriftPoints lists the rounds (0-based event indexes) at which the
// generator's concept changes abruptly; nil for gradual or continuous drift.
func (g *genSource) DriftPoints() []int { return g.drifts }

// Drifting is implemented by sources that know their drift points, for
// scoring drift detectors.
type Drifting interface {
	DriftPoints() []int
}

// every lists step, 2·step, ... below T.
func every(step, T int) []int {
	var out []int
	for t := step; t < T; t += step {
		out = append(out, t)
	}
	return out
}

func (g *genSource) Next(ctx context.Context) (Example, error) {
	if err := ctx.Err(); err != nil {
		return Example{}, err
	}
	if g.t >= g.T {
		return Example{}, io.EOF
	}
	v, y := g.next(g.t)
	x, err := learners.NewDense(v)
	if err != nil {
		return Example{}, fmt.Errorf("generated example %d: %w", g.t, err)
	}
	ex := Example{ID: strconv.Itoa(g.t), X: x, Label: y}
	g.t++
	return ex, nil
}

func sgn(m float64) int {
	if m >= 0 {
		return 1
	}
	return -1
}

func normals(r *rand.Rand, v []float64, scale float64) {
	for i := range v {
		v[i] = scale * r.NormFloat64()
	}
}

// latentHyperplane is the drifting-hyperplane stream of seed 000 (§7.1):
// x = A·z with z ~ N(0, I_d) and a fixed D×d matrix A, y = sgn(u·x), and a
// target u that takes a fresh random step (random drift) or a fixed step
// (linear drift) every round. RNG streams: 1 matrix, 2 inputs, 3 target.
func latentHyperplane(p *params, seed uint64) (Source, error) {
	d := p.int("d", 5, 1, "latent dimension")
	D := p.int("D", 1000, 1, "ambient dimension of x = A·z")
	T := p.int("T", 5000, 1, "stream length")
	drift := p.choice("drift", "target drift: random (a fresh step each round) or linear (one step repeated)", "random", "linear")
	sigma := p.float("sigma", 0.1, 0, 1e6, "random drift: δₜ ~ N(0, σ·I), covariance σI (per-coordinate std √σ)")
	deltaScale := p.float("delta_scale", 0, 0, 1e6, "linear drift: per-coordinate std of the fixed δ (0 = √sigma)")
	normalize := p.bool("normalize", false, "scale every x to unit norm")
	if p.describe || p.err != nil {
		return nil, p.err
	}
	if deltaScale == 0 {
		deltaScale = math.Sqrt(sigma)
	}
	matrix, inputs, target := rngStream(seed, 1), rngStream(seed, 2), rngStream(seed, 3)
	A := make([]float64, D*d)
	normals(matrix, A, 1)
	u := make([]float64, D)
	normals(target, u, 1)
	delta := make([]float64, D)
	if drift == "linear" {
		normals(target, delta, deltaScale)
	}
	z := make([]float64, d)
	return &genSource{dim: D, T: T, next: func(int) ([]float64, int) {
		normals(inputs, z, 1)
		x := make([]float64, D)
		for i := range x {
			row := A[i*d : (i+1)*d]
			for j, zj := range z {
				x[i] += row[j] * zj
			}
		}
		m := 0.0
		for i, xi := range x {
			m += u[i] * xi
		}
		if normalize {
			n := 0.0
			for _, xi := range x {
				n += xi * xi
			}
			if n > 0 {
				for i := range x {
					x[i] /= math.Sqrt(n)
				}
			}
		}
		if drift == "random" {
			normals(target, delta, math.Sqrt(sigma))
		}
		for i := range u {
			u[i] += delta[i]
		}
		return x, sgn(m)
	}}, nil
}

// switchingGaussian is seed 004's synthetic stream (§7.2): x ~ N(0, I_d),
// y = sgn(u·x), u re-drawn at rounds 0, period, 2·period, ...
// RNG streams: 1 inputs, 2 targets.
func switchingGaussian(p *params, seed uint64) (Source, error) {
	d := p.int("d", 50, 1, "dimension")
	T := p.int("T", 10000, 1, "stream length")
	period := p.int("period", 500, 1, "rounds between target switches")
	if p.describe || p.err != nil {
		return nil, p.err
	}
	inputs, targets := rngStream(seed, 1), rngStream(seed, 2)
	u := make([]float64, d)
	return &genSource{dim: d, T: T, drifts: every(period, T), next: func(t int) ([]float64, int) {
		if t%period == 0 {
			normals(targets, u, 1)
		}
		x := make([]float64, d)
		normals(inputs, x, 1)
		m := 0.0
		for i, xi := range x {
			m += u[i] * xi
		}
		return x, sgn(m)
	}}, nil
}

// sea is the SEA concepts stream (§7.4): x = (f₁, f₂, f₃) ~ U[0,10]³,
// y = +1 iff f₁ + f₂ ≤ θ (orientation le, as in the shared data file; gt is
// MOA's and River's), θ cycling 8, 9, 7, 9.5 every block rows, labels flipped
// when 1 + U{0..99} ≤ noise_pct (MOA). RNG streams: 1 inputs, 2 noise.
func sea(p *params, seed uint64) (Source, error) {
	T := p.int("T", 50000, 1, "stream length")
	block := p.int("block", 12500, 1, "rows per concept (12,500 in the shared file, 15,000 in the original stream)")
	noise := p.int("noise_pct", 10, 0, "label noise in percent")
	orientation := p.choice("orientation", "le: +1 iff f₁+f₂ ≤ θ (shared file); gt: +1 iff f₁+f₂ > θ (MOA, River)", "le", "gt")
	if p.describe || p.err != nil {
		return nil, p.err
	}
	if noise > 100 {
		return nil, fmt.Errorf("generator sea: parameter noise_pct = %d: must be ≤ 100: %w", noise, ErrParam)
	}
	thresholds := []float64{8, 9, 7, 9.5}
	inputs, flips := rngStream(seed, 1), rngStream(seed, 2)
	return &genSource{dim: 3, T: T, drifts: every(block, T), next: func(t int) ([]float64, int) {
		x := []float64{10 * inputs.Float64(), 10 * inputs.Float64(), 10 * inputs.Float64()}
		theta := thresholds[(t/block)%len(thresholds)]
		y := -1
		if (x[0]+x[1] <= theta) == (orientation == "le") {
			y = 1
		}
		if 1+flips.IntN(100) <= noise {
			y = -y
		}
		return x, y
	}}, nil
}

// hyperplane is MOA's rotating hyperplane (§7.5): x ~ U[0,1)ⁿ, y = +1 iff
// Σwᵢxᵢ ≥ ½Σwᵢ, noise flips, then the first n_drift weights move by
// mag_change and reverse direction with probability sigma_pct. One RNG stream
// in MOA's draw order: n features, one noise integer, one integer per
// drifting attribute.
func hyperplane(p *params, seed uint64) (Source, error) {
	n := p.int("n_features", 10, 1, "dimension")
	nDrift := p.int("n_drift", 2, 0, "number of drifting weights")
	mag := p.float("mag_change", 0, 0, 1e6, "weight change per example (0 = no drift; 0.001 is common)")
	noise := p.int("noise_pct", 5, 0, "label noise in percent")
	sigma := p.int("sigma_pct", 10, 0, "chance in percent that a drifting weight reverses direction")
	T := p.int("T", 10000, 1, "stream length")
	if p.describe || p.err != nil {
		return nil, p.err
	}
	switch {
	case nDrift > n:
		return nil, fmt.Errorf("generator hyperplane: parameter n_drift = %d: must be ≤ n_features = %d: %w", nDrift, n, ErrParam)
	case noise > 100 || sigma > 100:
		return nil, fmt.Errorf("generator hyperplane: noise_pct and sigma_pct must be ≤ 100: %w", ErrParam)
	}
	r := rngStream(seed, 1)
	w := make([]float64, n)
	dir := make([]float64, n)
	for i := range w {
		w[i] = r.Float64()
		if i < nDrift {
			dir[i] = 1
		}
	}
	return &genSource{dim: n, T: T, next: func(int) ([]float64, int) {
		x := make([]float64, n)
		sum, half := 0.0, 0.0
		for i := range x {
			x[i] = r.Float64()
			sum += w[i] * x[i]
			half += w[i]
		}
		y := -1
		if sum >= half/2 {
			y = 1
		}
		if 1+r.IntN(100) <= noise {
			y = -y
		}
		for i := 0; i < nDrift; i++ {
			w[i] += dir[i] * mag
			if 1+r.IntN(100) <= sigma {
				dir[i] = -dir[i]
			}
		}
		return x, y
	}}, nil
}

// DisjunctionStats is the bookkeeping of a shifting-disjunction stream that
// the Shifting Winnow and tracking Winnow bounds need.
type DisjunctionStats struct {
	// Additions counts literal additions, the initial literals included (Z⁺).
	Additions int
	// Removals counts literal removals (Z⁻).
	Removals int
	// AttributeErrors counts attribute errors (A).
	AttributeErrors int
}

// disjunctionSource is a genSource that also reports its bookkeeping.
type disjunctionSource struct {
	genSource
	stats DisjunctionStats
}

// Stats returns the bookkeeping of the examples generated so far.
func (s *disjunctionSource) Stats() DisjunctionStats { return s.stats }

// shiftingDisjunction is seed 002's experiment stream (§7.3, reconstructed):
// Boolean inputs; a monotone disjunction of k0 literals that, at each period
// boundary, alternately loses a random literal and gains a never-used one.
// y uniform; inactive attributes are fair coins; a positive example has
// exactly one active attribute on, a negative none. An attribute error turns
// one active attribute on in a negative example, or the active one off in a
// positive example. RNG stream 1 does everything, in that order.
func shiftingDisjunction(p *params, seed uint64) (Source, error) {
	n := p.int("n", 100, 2, "number of Boolean attributes")
	T := p.int("T", 10000, 1, "stream length")
	period := p.int("period", 1000, 1, "rounds between literal switches")
	k0 := p.int("k0", 4, 1, "initial number of active literals")
	pAttr := p.float("p_attr", 0, 0, 1, "probability of an attribute error per round")
	if p.describe || p.err != nil {
		return nil, p.err
	}
	if k0 >= n {
		return nil, fmt.Errorf("generator shifting-disjunction: parameter k0 = %d: must be < n = %d: %w", k0, n, ErrParam)
	}
	r := rngStream(seed, 1)
	perm := r.Perm(n)
	active, next := append([]int(nil), perm[:k0]...), k0
	removeNext := true
	src := &disjunctionSource{stats: DisjunctionStats{Additions: k0}}
	src.genSource = genSource{dim: n, T: T, drifts: every(period, T), next: func(t int) ([]float64, int) {
		if t > 0 && t%period == 0 {
			if removeNext && len(active) > 1 {
				k := r.IntN(len(active))
				active = append(active[:k], active[k+1:]...)
				src.stats.Removals++
			} else if next < n {
				active = append(active, perm[next])
				next++
				src.stats.Additions++
			}
			removeNext = !removeNext
		}
		isActive := make([]bool, n)
		for _, a := range active {
			isActive[a] = true
		}
		x := make([]float64, n)
		for i := range x {
			if !isActive[i] && r.IntN(2) == 1 {
				x[i] = 1
			}
		}
		y := 2*r.IntN(2) - 1
		if y == 1 {
			x[active[r.IntN(len(active))]] = 1
		}
		if r.Float64() < pAttr {
			src.stats.AttributeErrors++
			if y == 1 {
				for _, a := range active {
					x[a] = 0
				}
			} else {
				x[active[r.IntN(len(active))]] = 1
			}
		}
		return x, y
	}}
	return src, nil
}

// conceptDrift mixes two generators (§7.6, River's ConceptDriftStream): at
// example i (1-based) it draws U and takes the next example from new iff
// U ≤ 1/(1 + e^{−4(i−p)/w}). Width 0 is an abrupt switch at p (the example at
// p itself comes from either with probability ½). Parameters of the two
// streams are passed as old.k=v and new.k=v; each gets T examples unless told
// otherwise. RNG streams: old gets seed, new seed+1, the choice stream 3 of seed.
func conceptDrift(p *params, seed uint64) (Source, error) {
	names := []string{"hyperplane"} // the default for both: two seeds, two concepts
	for _, g := range generators() {
		if g.Name != "concept-drift" && g.Name != "hyperplane" {
			names = append(names, g.Name)
		}
	}
	oldName := p.choice("old", "generator before the drift", names...)
	newName := p.choice("new", "generator after the drift", names...)
	T := p.int("T", 10000, 1, "stream length")
	pos := p.float("position", 5000, 0, math.MaxFloat64, "center p of the drift (example index, 1-based)")
	width := p.float("width", 1000, 0, math.MaxFloat64, "width w of the drift (0 = abrupt)")
	if p.describe {
		p.infos = append(p.infos, ParamInfo{Name: "old.*, new.*", Default: "(their defaults, T = T)", Doc: "parameters of the two generators, e.g. old.block=2000"})
		return nil, nil
	}
	if p.err != nil {
		return nil, p.err
	}
	subSpec := func(prefix, name string) string {
		vals := url.Values{}
		for k, v := range p.vals {
			if rest, ok := strings.CutPrefix(k, prefix+"."); ok {
				p.used[k] = true
				vals[rest] = v
			}
		}
		if _, ok := vals["T"]; !ok {
			vals.Set("T", strconv.Itoa(T))
		}
		return name + "?" + vals.Encode()
	}
	oldSrc, err := OpenSynth(subSpec("old", oldName), seed)
	if err != nil {
		return nil, fmt.Errorf("generator concept-drift: old: %w", err)
	}
	newSrc, err := OpenSynth(subSpec("new", newName), seed+1)
	if err != nil {
		return nil, fmt.Errorf("generator concept-drift: new: %w", err)
	}
	if oldSrc.Dim() != newSrc.Dim() {
		return nil, fmt.Errorf("generator concept-drift: old %s has dimension %d, new %s has %d: %w", oldName, oldSrc.Dim(), newName, newSrc.Dim(), ErrParam)
	}
	return &driftSource{old: oldSrc, new: newSrc, T: T, pos: pos, width: width, choice: rngStream(seed, 3)}, nil
}

// driftSource is the concept-drift mixture.
type driftSource struct {
	old, new   Source
	t, T       int
	pos, width float64
	choice     *rand.Rand
}

func (d *driftSource) Dim() int { return d.old.Dim() }

// probNew is the probability that example i (1-based) comes from the new stream.
func (d *driftSource) probNew(i int) float64 {
	x := float64(i) - d.pos
	if d.width == 0 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return 0
		}
		return 0.5
	}
	return 1 / (1 + math.Exp(-4*x/d.width))
}

func (d *driftSource) Next(ctx context.Context) (Example, error) {
	if err := ctx.Err(); err != nil {
		return Example{}, err
	}
	if d.t >= d.T {
		return Example{}, io.EOF
	}
	d.t++
	from := d.old
	if d.choice.Float64() <= d.probNew(d.t) {
		from = d.new
	}
	ex, err := from.Next(ctx)
	if errors.Is(err, io.EOF) {
		return Example{}, fmt.Errorf("concept-drift: a component stream ended before example %d; give it a larger T: %w", d.t, ErrParam)
	}
	if err != nil {
		return Example{}, err
	}
	ex.ID = strconv.Itoa(d.t - 1)
	return ex, nil
}

// driftingClasses turns a multiclass CSV file (or several, concatenated) into
// a drifting binary stream (§7.2, the drifting-USPS stream of seed 004): every
// period rows it re-draws the set of positive classes, each class positive
// independently with probability ½, re-drawn while the set is empty or full.
// Rows keep their file order. RNG stream 1 draws the class sets.
func driftingClasses(p *params, seed uint64) (Source, error) {
	files := p.str("file", "", "CSV file(s) to concatenate, comma-separated (required)")
	if p.describe {
		p.infos[len(p.infos)-1].Default = "(required)"
	}
	label := p.str("label", "first", "class column: 1-based index, first or last")
	period := p.int("period", 500, 1, "rows between re-draws of the positive classes")
	if p.describe || p.err != nil {
		return nil, p.err
	}
	if files == "" {
		return nil, fmt.Errorf("generator drifting-classes: parameter file is required (for USPS: file=../shared/data/usps/usps_train.csv.gz,../shared/data/usps/usps_test.csv.gz): %w", ErrParam)
	}
	var rows []Example
	dim := -1
	for _, path := range strings.Split(files, ",") {
		src, err := OpenCSV(path, CSVOptions{Label: label, RawClass: true})
		if err != nil {
			return nil, fmt.Errorf("generator drifting-classes: %w", err)
		}
		if dim >= 0 && src.Dim() != dim {
			return nil, fmt.Errorf("generator drifting-classes: %s has dimension %d, earlier files %d: %w", path, src.Dim(), dim, ErrFormat)
		}
		dim = src.Dim()
		for {
			ex, err := src.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("generator drifting-classes: %w", err)
			}
			rows = append(rows, ex)
		}
	}
	var classes []string
	seen := map[string]bool{}
	for _, ex := range rows {
		if !seen[ex.Class] {
			seen[ex.Class] = true
			classes = append(classes, ex.Class)
		}
	}
	slices.Sort(classes)
	if len(classes) < 2 {
		return nil, fmt.Errorf("generator drifting-classes: %d class(es) in %s; need at least 2: %w", len(classes), files, ErrFormat)
	}
	r := rngStream(seed, 1)
	positive := map[string]bool{}
	src := &classSource{rows: rows, dim: dim, period: period}
	src.draw = func() {
		for {
			clear(positive)
			for _, c := range classes {
				if r.IntN(2) == 1 {
					positive[c] = true
				}
			}
			if len(positive) > 0 && len(positive) < len(classes) {
				return
			}
		}
	}
	src.positive = positive
	return src, nil
}

// classSource replays rows with labels from the current positive class set.
type classSource struct {
	rows     []Example
	dim, t   int
	period   int
	positive map[string]bool
	draw     func()
}

func (s *classSource) Dim() int { return s.dim }

func (s *classSource) Next(ctx context.Context) (Example, error) {
	if err := ctx.Err(); err != nil {
		return Example{}, err
	}
	if s.t >= len(s.rows) {
		return Example{}, io.EOF
	}
	if s.t%s.period == 0 {
		s.draw()
	}
	ex := s.rows[s.t]
	ex.ID = strconv.Itoa(s.t)
	ex.Label = -1
	if s.positive[ex.Class] {
		ex.Label = 1
	}
	s.t++
	return ex, nil
}
