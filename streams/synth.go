package streams

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// ErrParam reports an unknown, malformed or out-of-range generator parameter.
var ErrParam = errors.New("invalid generator parameter")

// ErrUnknownGenerator reports a generator name that does not exist.
var ErrUnknownGenerator = errors.New("unknown generator")

// SynthPrefix marks a data source that is a built-in generator:
// "synth:NAME?k=v&...".
const SynthPrefix = "synth:"

// Generator describes one built-in stream generator.
type Generator struct {
	Name    string
	Summary string
	// Params lists the parameters with defaults, as the generator reads them.
	Params []ParamInfo
	build  func(p *params, seed uint64) (Source, error)
}

// ParamInfo describes one generator parameter.
type ParamInfo struct {
	Name    string `json:"name"`
	Default string `json:"default"`
	Doc     string `json:"doc"`
}

// Generators lists the built-in generators with their parameters.
func Generators() []Generator {
	gens := generators()
	for i := range gens {
		p := &params{describe: true}
		gens[i].build(p, 0) // describe mode: records parameters, builds nothing
		gens[i].Params = p.infos
	}
	return gens
}

// IsSynth reports whether a data source names a generator.
func IsSynth(spec string) bool { return strings.HasPrefix(spec, SynthPrefix) }

// OpenSynth builds the generator named by spec ("synth:NAME?k=v&..." or just
// "NAME?k=v"), seeded with seed. Unknown generators and parameters are errors
// that list the valid ones.
func OpenSynth(spec string, seed uint64) (Source, error) {
	spec = strings.TrimPrefix(spec, SynthPrefix)
	name, query, _ := strings.Cut(spec, "?")
	vals, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("generator %s: parameters %q: %v: %w", name, query, err, ErrParam)
	}
	var names []string
	for _, g := range generators() {
		names = append(names, g.Name)
		if g.Name == name {
			p := &params{gen: name, vals: vals, used: map[string]bool{}}
			src, err := g.build(p, seed)
			if err == nil {
				err = p.done()
			}
			if err != nil {
				return nil, err
			}
			return src, nil
		}
	}
	return nil, fmt.Errorf("%w %q; valid generators: %s", ErrUnknownGenerator, name, strings.Join(names, ", "))
}

// params reads a generator's parameters from a query string, records what was
// asked for (to list valid names and to describe the generator) and keeps the
// first error.
type params struct {
	gen      string
	vals     url.Values
	used     map[string]bool
	err      error
	describe bool
	infos    []ParamInfo
}

func (p *params) raw(key, def, doc string) (string, bool) {
	if p.describe {
		p.infos = append(p.infos, ParamInfo{Name: key, Default: def, Doc: doc})
		return "", false
	}
	p.used[key] = true
	vs, ok := p.vals[key]
	if !ok {
		return "", false
	}
	if len(vs) != 1 && p.err == nil {
		p.err = fmt.Errorf("generator %s: parameter %s given %d times: %w", p.gen, key, len(vs), ErrParam)
	}
	return vs[0], true
}

func (p *params) fail(key, value, why string) {
	if p.err == nil {
		p.err = fmt.Errorf("generator %s: parameter %s = %s: %s: %w", p.gen, key, value, why, ErrParam)
	}
}

// int reads an integer parameter that must be at least min.
func (p *params) int(key string, def, min int, doc string) int {
	s, ok := p.raw(key, strconv.Itoa(def), doc)
	if !ok {
		return def
	}
	v, err := strconv.Atoi(s)
	switch {
	case err != nil:
		p.fail(key, s, "not an integer")
	case v < min:
		p.fail(key, s, fmt.Sprintf("must be ≥ %d", min))
	default:
		return v
	}
	return def
}

// float reads a finite float parameter in [lo, hi].
func (p *params) float(key string, def, lo, hi float64, doc string) float64 {
	s, ok := p.raw(key, strconv.FormatFloat(def, 'g', -1, 64), doc)
	if !ok {
		return def
	}
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || v != v:
		p.fail(key, s, "not a number")
	case v < lo || v > hi:
		p.fail(key, s, fmt.Sprintf("must be in [%g, %g]", lo, hi))
	default:
		return v
	}
	return def
}

// choice reads a string parameter from a fixed set; the first is the default.
func (p *params) choice(key, doc string, options ...string) string {
	s, ok := p.raw(key, options[0], doc+" ("+strings.Join(options, "|")+")")
	if !ok {
		return options[0]
	}
	if !slices.Contains(options, s) {
		p.fail(key, s, "must be one of "+strings.Join(options, ", "))
		return options[0]
	}
	return s
}

// str reads a free-form string parameter.
func (p *params) str(key, def, doc string) string {
	s, ok := p.raw(key, def, doc)
	if !ok {
		return def
	}
	return s
}

// bool reads a true/false parameter.
func (p *params) bool(key string, def bool, doc string) bool {
	s, ok := p.raw(key, strconv.FormatBool(def), doc)
	if !ok {
		return def
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		p.fail(key, s, "must be true or false")
		return def
	}
	return v
}

// done reports the first error, or an unknown parameter with the valid list.
func (p *params) done() error {
	if p.err != nil {
		return p.err
	}
	var valid []string
	for k := range p.used {
		valid = append(valid, k)
	}
	slices.Sort(valid)
	for k := range p.vals {
		if !p.used[k] {
			return fmt.Errorf("generator %s: unknown parameter %q; valid: %s: %w", p.gen, k, strings.Join(valid, ", "), ErrParam)
		}
	}
	return nil
}
