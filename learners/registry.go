package learners

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// ErrUnknownLearner reports a learner name that is not in the catalog.
var ErrUnknownLearner = errors.New("unknown learner")

// ErrParam reports an unknown, malformed or out-of-range learner parameter.
var ErrParam = errors.New("invalid learner parameter")

// Info describes one learner of the catalog.
type Info struct {
	// Name is the catalog name used by the CLI and configuration.
	Name string `json:"name"`
	// Summary says what the learner does, in one line.
	Summary string `json:"summary"`
	// Params lists the parameters with their defaults.
	Params []ParamInfo `json:"params"`
	// Source is the paper the algorithm comes from.
	Source string `json:"source"`
	// Sampling is true for learners with a native label-query rule.
	Sampling bool `json:"sampling"`
}

// ParamInfo describes one learner parameter.
type ParamInfo struct {
	Name string `json:"name"`
	// Default is the value used when the parameter is absent: a JSON value, or
	// a string formula such as "n/2" for defaults derived from the dimension.
	Default any    `json:"default"`
	Doc     string `json:"doc"`
}

// entry is one catalog row: its description and how to build it.
type entry struct {
	info  Info
	build func(raw json.RawMessage, cfg Config) (Learner, error)
	// prepare decodes raw once and returns a builder that reuses it (Maker).
	prepare func(raw json.RawMessage) (func(Config) (Learner, error), error)
	params  func() any // a fresh parameter struct with defaults, for the catalog
	// size is the state's largest size in 8-byte words, and the decoded
	// parameters.
	size func(raw json.RawMessage, dim int) (int64, any, error)
	// added lists parameters added after snapshots of the learner were
	// written, each with the value that gives the learner those snapshots
	// are of (a snapshot names every parameter its learner had; one it
	// lacks is not today's default).
	added map[string]json.RawMessage
}

// snapshotParams is a snapshot's parameters raw with every parameter the
// learner gained since snapshots without it were written.
func (e entry) snapshotParams(raw json.RawMessage) (json.RawMessage, error) {
	if len(e.added) == 0 {
		return raw, nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return nil, fmt.Errorf("snapshot parameters: %w: %w", err, ErrSnapshot)
	}
	if keys == nil {
		keys = map[string]json.RawMessage{}
	}
	missing := false
	for k, v := range e.added {
		if _, ok := keys[k]; !ok {
			keys[k], missing = v, true
		}
	}
	if !missing {
		return raw, nil
	}
	return json.Marshal(keys)
}

// define builds a catalog entry whose parameters are the exported fields of P
// (json tag = name, doc tag = description, def tag = displayed default when it
// is derived rather than literal).
func define[P stateSizer](name, summary, source string, sampling bool, defaults func() P, build func(*P, Config) (Learner, error)) entry {
	return entry{
		info: Info{Name: name, Summary: summary, Source: source, Sampling: sampling},
		build: func(raw json.RawMessage, cfg Config) (Learner, error) {
			p := defaults()
			if err := decodeParams(name, raw, &p); err != nil {
				return nil, err
			}
			return build(&p, cfg)
		},
		prepare: func(raw json.RawMessage) (func(Config) (Learner, error), error) {
			p := defaults()
			if err := decodeParams(name, raw, &p); err != nil {
				return nil, err
			}
			if holdsReferences(reflect.TypeOf(p)) {
				// A slice or map would be shared by every learner built from
				// the copy below: decode afresh for each instead.
				return func(cfg Config) (Learner, error) {
					q := defaults()
					if err := decodeParams(name, raw, &q); err != nil {
						return nil, err
					}
					return build(&q, cfg)
				}, nil
			}
			return func(cfg Config) (Learner, error) {
				q := p // a copy: a constructor may adjust its parameters
				return build(&q, cfg)
			}, nil
		},
		params: func() any { p := defaults(); return &p },
		size: func(raw json.RawMessage, dim int) (int64, any, error) {
			p := defaults()
			if err := decodeParams(name, raw, &p); err != nil {
				return 0, nil, err
			}
			words, err := p.maxWords(dim)
			if err != nil {
				return 0, nil, fmt.Errorf("learner %s: %w", name, err)
			}
			return words, p, nil
		},
	}
}

// withAdded marks parameter name as added after snapshots without it were
// written, which are of the learner with that parameter at value (JSON).
func (e entry) withAdded(name, value string) entry {
	if e.added == nil {
		e.added = map[string]json.RawMessage{}
	}
	e.added[name] = json.RawMessage(value)
	return e
}

// Catalog describes every learner, in catalog order.
func Catalog() []Info {
	es := entries()
	out := make([]Info, len(es))
	for i, e := range es {
		out[i] = e.info
		out[i].Params = paramInfos(e.params())
	}
	return out
}

// Names lists the catalog names.
func Names() []string {
	es := entries()
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.info.Name
	}
	return out
}

// Lookup returns the catalog entry of name.
func Lookup(name string) (Info, error) {
	for _, e := range entries() {
		if e.info.Name == name {
			in := e.info
			in.Params = paramInfos(e.params())
			return in, nil
		}
	}
	return Info{}, fmt.Errorf("%w %q; valid learners: %s", ErrUnknownLearner, name, strings.Join(Names(), ", "))
}

// New builds the learner name with JSON parameters params (nil or empty for
// all defaults) for inputs of dimension cfg.Dim. Unknown names and parameters,
// malformed values and values out of range are errors that name the culprit and
// list what is valid.
func New(name string, params json.RawMessage, cfg Config) (Learner, error) {
	for _, e := range entries() {
		if e.info.Name == name {
			return e.build(params, cfg)
		}
	}
	return nil, fmt.Errorf("%w %q; valid learners: %s", ErrUnknownLearner, name, strings.Join(Names(), ", "))
}

// Maker builds learners of one catalog name, parameters and dimension, as
// New does, bit for bit, but decodes, validates and encodes the parameters
// once rather than for every learner: a worker builds one learner per key,
// and a restore thousands per second. The learners it builds share one
// read-only identity (name, dimension, encoded parameters). A Maker is safe for
// concurrent use.
type Maker struct {
	name   string
	dim    int
	build  func(Config) (Learner, error)
	shared *identity // what every learner's snapshot header holds
}

// NewMaker validates name, params and dim by building one learner, and
// returns a Maker of more like it.
func NewMaker(name string, params json.RawMessage, dim int) (*Maker, error) {
	for _, e := range entries() {
		if e.info.Name != name {
			continue
		}
		build, err := e.prepare(params)
		if err != nil {
			return nil, err
		}
		l, err := build(Config{Dim: dim})
		if err != nil {
			return nil, err
		}
		m := &Maker{name: name, dim: dim, build: build}
		if c, ok := l.(interface{ sharedIdentity() *identity }); ok {
			m.shared = c.sharedIdentity()
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w %q; valid learners: %s", ErrUnknownLearner, name, strings.Join(Names(), ", "))
}

// New builds a learner for cfg, whose Dim must be the Maker's.
func (m *Maker) New(cfg Config) (Learner, error) {
	if cfg.Dim != m.dim {
		return nil, fmt.Errorf("learner %s: dimension %d from a maker of dimension %d: %w", m.name, cfg.Dim, m.dim, ErrParam)
	}
	cfg.shared = m.shared
	return m.build(cfg)
}

// holdsReferences reports whether values of t share memory when copied: a
// slice, map, pointer, interface, channel or function anywhere in it.
func holdsReferences(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return holdsReferences(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsReferences(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// DefaultRestoreBytes is the state size Restore accepts (1 GiB).
const DefaultRestoreBytes = 1 << 30

// Restore rebuilds a learner from a snapshot alone: the snapshot names the
// learner, its dimension and its parameters, and carries its complete state.
// It is RestoreWithin with DefaultRestoreBytes.
func Restore(snapshot []byte) (Learner, error) {
	return RestoreWithin(snapshot, DefaultRestoreBytes)
}

// RestoreWithin is Restore for a learner whose state may take at most
// maxBytes (StateBytes of the snapshot's learner, parameters and dimension):
// a corrupt or hostile header naming a huge dimension is refused before
// anything is allocated.
func RestoreWithin(snapshot []byte, maxBytes int64) (Learner, error) {
	h, _, err := readHeader(snapshot)
	if err != nil {
		return nil, err
	}
	name := string(h.name)
	var params json.RawMessage = h.params
	for _, e := range entries() {
		if e.info.Name == name {
			if params, err = e.snapshotParams(params); err != nil {
				return nil, fmt.Errorf("restore %s: %w", name, err)
			}
		}
	}
	size, err := StateBytes(name, params, h.dim)
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", name, err)
	}
	if size > maxBytes {
		return nil, fmt.Errorf("restore %s: dimension %d needs up to %d bytes of state, more than the limit of %d: %w", name, h.dim, size, maxBytes, ErrSnapshot)
	}
	l, err := New(name, params, Config{Dim: h.dim})
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", name, err)
	}
	if err := l.UnmarshalBinary(snapshot); err != nil {
		return nil, fmt.Errorf("restore %s: %w", name, err)
	}
	return l, nil
}

// decodeParams fills p from raw, rejecting unknown keys with the list of valid ones.
func decodeParams(name string, raw json.RawMessage, p any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return fmt.Errorf("learner %s: parameters must be a JSON object: %v: %w", name, err, ErrParam)
	}
	valid := paramNames(p)
	for _, k := range slices.Sorted(maps.Keys(keys)) { // the first unknown by name, every time
		if !slices.Contains(valid, k) {
			if len(valid) == 0 {
				return fmt.Errorf("learner %s: unknown parameter %q; it takes no parameters: %w", name, k, ErrParam)
			}
			return fmt.Errorf("learner %s: unknown parameter %q; valid: %s: %w", name, k, strings.Join(valid, ", "), ErrParam)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("learner %s: parameter %s: got JSON %s, want %s: %w", name, te.Field, te.Value, te.Type, ErrParam)
		}
		return fmt.Errorf("learner %s: %v: %w", name, err, ErrParam)
	}
	return nil
}

// paramFields lists the parameter fields of struct type t, flattening embedded
// structs the way encoding/json does; each field's Index is its full path.
func paramFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for _, sub := range paramFields(f.Type) {
				sub.Index = append([]int{i}, sub.Index...)
				out = append(out, sub)
			}
			continue
		}
		if f.IsExported() && jsonName(f) != "" {
			out = append(out, f)
		}
	}
	return out
}

func jsonName(f reflect.StructField) string {
	n, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if n == "-" {
		return ""
	}
	return n
}

func paramNames(p any) []string {
	var out []string
	for _, f := range paramFields(reflect.TypeOf(p).Elem()) {
		out = append(out, jsonName(f))
	}
	sort.Strings(out)
	return out
}

// paramInfos describes the fields of the parameter struct behind p.
func paramInfos(p any) []ParamInfo {
	v := reflect.ValueOf(p).Elem()
	out := []ParamInfo{}
	for _, f := range paramFields(v.Type()) {
		var def any
		if d, ok := f.Tag.Lookup("def"); ok {
			def = d
		} else {
			b, _ := json.Marshal(v.FieldByIndex(f.Index).Interface())
			def = json.RawMessage(b)
		}
		out = append(out, ParamInfo{Name: jsonName(f), Default: def, Doc: f.Tag.Get("doc")})
	}
	return out
}

// newMeta validates the dimension and records the canonical parameters.
func newMeta(name string, cfg Config, params any) (meta, error) {
	if cfg.Dim < 1 {
		return meta{}, fmt.Errorf("learner %s: dimension %d: must be ≥ 1: %w", name, cfg.Dim, ErrParam)
	}
	if s := cfg.shared; s != nil && s.name == name && s.dim == cfg.Dim { // a Maker's: the same parameters, already encoded
		return meta{s}, nil
	}
	b, err := json.Marshal(params)
	if err != nil {
		return meta{}, fmt.Errorf("learner %s: encode parameters: %w", name, err)
	}
	return meta{&identity{name: name, dim: cfg.Dim, params: b}}, nil
}

// paramError reports an out-of-range parameter value.
func paramError(learner, param string, value any, why string) error {
	return fmt.Errorf("learner %s: parameter %s = %v: %s: %w", learner, param, value, why, ErrParam)
}

// Real is a float parameter that may be +∞, written in JSON as a number or as
// the string "inf" (JSON has no infinity). Query scales and LASEC's drift
// parameter use it: +∞ switches the feature off (always query, no drift).
type Real float64

// UnmarshalJSON accepts a number, "inf", "+inf" or "Infinity".
func (r *Real) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		switch strings.ToLower(s) {
		case "inf", "+inf", "infinity", "+infinity":
			*r = Real(math.Inf(1))
			return nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && finite(f) {
			*r = Real(f)
			return nil
		}
		return fmt.Errorf("%q is neither a number nor \"inf\"", s)
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%s is neither a number nor \"inf\"", b)
	}
	*r = Real(f)
	return nil
}

// MarshalJSON writes +∞ as "inf" and other values as numbers.
func (r Real) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(r), 1) {
		return []byte(`"inf"`), nil
	}
	if !finite(float64(r)) {
		return nil, fmt.Errorf("cannot encode %v", float64(r))
	}
	return json.Marshal(float64(r))
}

// positive reports whether v is in (0, +∞], the range of scales that may be infinite.
func (r Real) positive() bool { return float64(r) > 0 && !math.IsNaN(float64(r)) }

// entries is the catalog, built on demand (it is constant; building it per
// call keeps the package free of initialization order and global state).
// catalog is the table of learners, built on first use and never changed:
// names, documentation and constructors.
var catalog struct {
	once    sync.Once
	entries []entry
}

// entries is the catalog; building it takes 50 µs and hundreds of
// allocations, which a restore of many keys must not pay per key.
func entries() []entry {
	catalog.once.Do(func() { catalog.entries = buildEntries() })
	return catalog.entries
}

func buildEntries() []entry {
	return []entry{
		define("perceptron", "Rosenblatt's Perceptron: w += y·x on mistakes (baseline)",
			"Rosenblatt 1958; baseline in Crammer, Mansour, Even-Dar, Vaughan, Regret minimization with concept drift (COLT 2010)", false,
			func() PerceptronParams { return PerceptronParams{} }, newPerceptron),
		define("modified-perceptron", "unit-norm Perceptron whose mistakes reflect w through x's hyperplane",
			"Blum, Frieze, Kannan, Vempala 1998; analysed for drift in Crammer et al., Regret minimization with concept drift (COLT 2010) §5.2", false,
			func() ModifiedPerceptronParams {
				return ModifiedPerceptronParams{Init: "first-example", RenormalizeEvery: 1}
			}, newModifiedPerceptron),
		define("shifting-perceptron", "Perceptron that shrinks w by 1−λ/(λ+k) before each update",
			"Cavallanti, Cesa-Bianchi, Gentile, Tracking the best hyperplane with a simple budget Perceptron (2007)", false,
			func() ShiftingPerceptronParams { return ShiftingPerceptronParams{Lambda: 0.01} }, newShiftingPerceptron),
		define("budget-perceptron", "Randomized Budget Perceptron: at most B support examples, uniform eviction",
			"Cavallanti, Cesa-Bianchi, Gentile, Tracking the best hyperplane with a simple budget Perceptron (2007)", false,
			func() BudgetPerceptronParams { return BudgetPerceptronParams{Budget: 300, RecomputeEvery: 10000} }, newBudgetPerceptron),
		define("threshold-tracker", "1-D drifting threshold: interval of consistent thresholds, widened by γ each round",
			"Crammer et al., Regret minimization with concept drift (COLT 2010) §5.1", false,
			func() ThresholdTrackerParams { return ThresholdTrackerParams{Gamma: 0.01} }, newThresholdTracker),
		define("winnow2", "Littlestone's Winnow2: multiplicative promotion/demotion of active weights (baseline)",
			"Littlestone, Learning quickly when irrelevant attributes abound (1988)", false,
			func() Winnow2Params { return Winnow2Params{Alpha: 2, W0: 1} }, newWinnow2),
		define("tracking-winnow", "Winnow with a weight floor ε that tracks shifting linear-threshold concepts",
			"Mesterharm, Tracking linear-threshold concepts with Winnow (JMLR 2003)", false,
			func() TrackingWinnowParams { return TrackingWinnowParams{Delta: 0.5} }, newTrackingWinnow),
		define("swin", "Shifting Winnow for disjunctions, with floor β/n; deterministic or randomized",
			"Auer, Warmuth, Tracking the best disjunction (Machine Learning 1998), reconstructed in ALGORITHMS.md §4.3", false,
			func() SwinParams { return SwinParams{Alpha: 1.32, Beta: 0.0269} }, newSwin),
		define("weighted-majority", "exponentially weighted vote over member learners (avoids tuning their parameters)",
			"Littlestone, Warmuth, The weighted majority algorithm (1994), as proposed in Mesterharm (JMLR 2003) §4.2", false,
			func() WeightedMajorityParams { return WeightedMajorityParams{Beta: 0.5} }, newWeightedMajority),
		define("odm", "online optimal-margin-distribution learner: OGD on the ODM loss",
			"Zhang, Zhao, Jin, Optimal margin distribution learning in dynamic environments (AAAI 2020)", false,
			func() ODMParams { return defaultODMParams() }, newODM),
		define("dynamic-odm", "ensemble of restarted ODM learners over geometric epochs, exponentially weighted",
			"Zhang, Zhao, Jin, Optimal margin distribution learning in dynamic environments (AAAI 2020)", false,
			func() DynamicODMParams {
				return DynamicODMParams{ODMParams: defaultODMParams(), Init: "random", InitStd: 0.01, C: 1}
			}, newDynamicODM),
		define("sop", "second-order Perceptron: mistake-driven ridge regression on the updates",
			"Cesa-Bianchi, Conconi, Gentile, A second-order Perceptron algorithm (SIAM J. Comput. 2005)", false,
			func() SOPParams { return SOPParams{A: 1} }, newSOP),
		define("lasec", "last-step min-max second-order classifier with drift (Kalman-like covariance growth)",
			"Moroshko, Crammer, Selective sampling with drift (AISTATS 2014)", false,
			func() LASECParams { return LASECParams{B: 1, C: 100} }, newLASEC),
		define("perceptron-ss", "selective-sampling Perceptron: queries with probability b/(b+|w·x|)",
			"Cesa-Bianchi, Gentile, Zaniboni, Worst-case analysis of selective sampling for linear classification (JMLR 2006)", true,
			func() PerceptronSSParams { return PerceptronSSParams{B: 10} }, newPerceptronSS),
		define("sop-ss", "selective-sampling second-order Perceptron: queries with probability b/(b+|p̂|)",
			"Cesa-Bianchi, Gentile, Zaniboni, Worst-case analysis of selective sampling for linear classification (JMLR 2006)", true,
			func() SOPSSParams { return SOPSSParams{A: 1, B: 0.03} }, newSOPSS),
		define("lasec-ss", "selective-sampling LASEC: queries with probability a/(a+|p̂|)",
			"Moroshko, Crammer, Selective sampling with drift (AISTATS 2014)", true,
			func() LASECSSParams { return LASECSSParams{B: 1, C: 100, A: 0.003} }, newLASECSS),
		define("bbq", "Bound on Bias Query: RLS that queries when xᵀ(A+xxᵀ)⁻¹x > ρ·t^−κ",
			"Cesa-Bianchi, Gentile, Orabona, Robust bounds for classification via selective sampling (ICML 2009)", true,
			func() BBQParams { return BBQParams{Kappa: 0.5, A: 1, Rho: 1} }, newBBQ),
		define("bbq-i", "BBQ that updates only on queried mistakes (adapts better under drift)",
			"Moroshko, Crammer, Selective sampling with drift (AISTATS 2014), after Cesa-Bianchi, Gentile, Orabona (2009)", true,
			func() BBQParams { return BBQParams{Kappa: 0.5, A: 1, Rho: 1} }, newBBQI),
		define("logreg", "online logistic regression with per-coordinate adaptive steps (AdaGrad); a probability with every prediction",
			"beyond the papers: Duchi, Hazan, Singer, Adaptive subgradient methods (JMLR 2011); per-coordinate rates as in McMahan et al., Ad click prediction (KDD 2013)", false,
			func() LogRegParams {
				return LogRegParams{Eta: 0.25, Decay: 0.99, Slow: 0.08, Select: 0.999, Weigh: weighErrors, Prior: 3}
			}, newLogReg).
			withAdded("slow", "0").          // snapshots of before it are of one step size
			withAdded("weigh", `"logloss"`). // and the first two-step learner weighed by log loss
			withAdded("prior", "0"),         // and had no prior
	}
}
