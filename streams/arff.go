package streams

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/driftstream/driftstream/learners"
)

// ARFFOptions says how to read an ARFF file.
type ARFFOptions struct {
	// Label is the class attribute: its name, a 1-based index, "first" or
	// "last"; empty for unlabeled data.
	Label string
	// Labels maps the class values to −1/+1.
	Labels LabelMap
	// NominalAsNumber keeps a nominal attribute whose values are all finite
	// numbers ({1,2,...,7}) as one feature holding the value, as a paper's
	// table counts it, instead of one-hot encoding it.
	NominalAsNumber bool
}

// arffAttr is one attribute: numeric, or nominal with its values.
type arffAttr struct {
	name   string
	values []string // nil for numeric
	binary bool     // nominal {0,1}: kept as one 0/1 feature
	// nums: the values as numbers when the nominal is kept as one feature
	// holding its value (ARFFOptions.NominalAsNumber); nil otherwise.
	nums   []float64
	offset int // first feature index
}

// arffSource streams the @data section of an ARFF file. Numeric attributes
// are features; nominal attributes are one-hot encoded, except two-valued
// {0,1} attributes (binary word indicators), which stay one 0/1 feature.
// A missing value "?" in a feature is an error (driftstream learners need
// complete inputs); in the class it marks an unlabeled event.
type arffSource struct {
	path     string
	opts     ARFFOptions
	sc       *bufio.Scanner
	closer   io.Closer
	line     int
	attrs    []arffAttr
	labelCol int
	dim      int
	row      int
	done     bool
}

// OpenARFF opens an ARFF stream (dense rows; sparse {i v} rows are rejected
// with a clear error).
func OpenARFF(path string, opts ARFFOptions) (Source, error) {
	if opts.Label != "" {
		if err := opts.Labels.check(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	rc, err := openData(path)
	if err != nil {
		return nil, err
	}
	s := &arffSource{path: path, opts: opts, sc: bufio.NewScanner(rc), closer: rc, labelCol: -1}
	s.sc.Buffer(make([]byte, 1<<16), 1<<26)
	if err := s.readHeader(); err != nil {
		rc.Close()
		return nil, err
	}
	return s, nil
}

func (s *arffSource) readHeader() error {
	for s.sc.Scan() {
		s.line++
		line := strings.TrimSpace(s.sc.Text())
		if line == "" || strings.HasPrefix(line, "%") {
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		switch strings.ToLower(word) {
		case "@relation":
		case "@attribute":
			a, err := parseAttribute(strings.TrimSpace(rest))
			if err != nil {
				return posError(s.path, s.line, 0, "%v", err)
			}
			s.attrs = append(s.attrs, a)
		case "@data":
			return s.layout()
		default:
			return posError(s.path, s.line, 1, "unexpected %q in the header", word)
		}
	}
	if err := s.sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	return fmt.Errorf("%s: no @data section: %w", s.path, ErrFormat)
}

// parseAttribute reads "name type": name possibly quoted, type numeric/real/
// integer or a nominal {v1,v2,...}.
func parseAttribute(s string) (arffAttr, error) {
	var a arffAttr
	if s == "" {
		return a, errors.New("@attribute without a name")
	}
	if q := s[0]; q == '\'' || q == '"' {
		end := strings.IndexByte(s[1:], q)
		if end < 0 {
			return a, errors.New("unterminated quoted attribute name")
		}
		a.name, s = s[1:end+1], strings.TrimSpace(s[end+2:])
	} else {
		a.name, s, _ = strings.Cut(s, " ")
		if i := strings.IndexAny(a.name, "\t{"); i >= 0 { // "name{a,b}" or tab-separated
			a.name, s = a.name[:i], a.name[i:]+" "+s
		}
		s = strings.TrimSpace(s)
	}
	switch {
	case strings.HasPrefix(s, "{"):
		end := strings.LastIndexByte(s, '}')
		if end < 0 {
			return a, fmt.Errorf("attribute %s: unterminated nominal set", a.name)
		}
		for _, v := range strings.Split(s[1:end], ",") {
			a.values = append(a.values, unquote(strings.TrimSpace(v)))
		}
		a.binary = len(a.values) == 2 && a.values[0] == "0" && a.values[1] == "1"
	default:
		switch strings.ToLower(strings.Fields(s + " x")[0]) {
		case "numeric", "real", "integer":
		default:
			return a, fmt.Errorf("attribute %s: unsupported type %q (numeric, real, integer or a nominal {…})", a.name, s)
		}
	}
	return a, nil
}

func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// layout resolves the label attribute and assigns feature offsets.
func (s *arffSource) layout() error {
	if len(s.attrs) == 0 {
		return fmt.Errorf("%s: no attributes: %w", s.path, ErrFormat)
	}
	names := make([]string, len(s.attrs))
	for i, a := range s.attrs {
		names[i] = a.name
	}
	var err error
	if s.labelCol, err = column(s.opts.Label, names, len(s.attrs)); err != nil {
		return fmt.Errorf("%s: label attribute: %v: %w", s.path, err, ErrOption)
	}
	if s.labelCol >= 0 {
		if a := s.attrs[s.labelCol]; a.values != nil && s.opts.Labels.Positive != "" && !slices.Contains(a.values, s.opts.Labels.Positive) {
			return fmt.Errorf("%s: positive label %q is not a value of %s {%s}: %w", s.path, s.opts.Labels.Positive, a.name, strings.Join(a.values, ","), ErrOption)
		}
	}
	for i := range s.attrs {
		if i == s.labelCol {
			continue
		}
		if s.opts.NominalAsNumber {
			s.attrs[i].nums = numbers(s.attrs[i].values)
		}
		s.attrs[i].offset = s.dim
		if s.attrs[i].values == nil || s.attrs[i].binary || s.attrs[i].nums != nil {
			s.dim++
		} else {
			s.dim += len(s.attrs[i].values)
		}
	}
	if s.dim == 0 {
		return fmt.Errorf("%s: no feature attributes: %w", s.path, ErrFormat)
	}
	return nil
}

// numbers returns a nominal attribute's values as numbers, or nil if one of
// them is not a finite number (or the attribute is numeric).
func numbers(values []string) []float64 {
	if values == nil {
		return nil
	}
	nums := make([]float64, len(values))
	for i, v := range values {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		nums[i] = f
	}
	return nums
}

func (s *arffSource) Dim() int { return s.dim }

func (s *arffSource) Next(ctx context.Context) (Example, error) {
	if err := ctx.Err(); err != nil {
		return Example{}, err
	}
	if s.done {
		return Example{}, io.EOF
	}
	for s.sc.Scan() {
		s.line++
		line := strings.TrimSpace(s.sc.Text())
		if line == "" || strings.HasPrefix(line, "%") {
			continue
		}
		return s.parseRow(line)
	}
	s.done = true
	s.closer.Close()
	if err := s.sc.Err(); err != nil {
		return Example{}, fmt.Errorf("%s: %w", s.path, err)
	}
	return Example{}, io.EOF
}

func (s *arffSource) parseRow(line string) (Example, error) {
	if strings.HasPrefix(line, "{") {
		return Example{}, posError(s.path, s.line, 1, "sparse ARFF rows are not supported; convert the file to dense rows")
	}
	fields := strings.Split(line, ",")
	if len(fields) != len(s.attrs) {
		return Example{}, posError(s.path, s.line, 0, "%d values, the header declares %d attributes", len(fields), len(s.attrs))
	}
	x := make([]float64, s.dim)
	ex := Example{ID: strconv.Itoa(s.row)}
	col := 1
	for i, f := range fields {
		v := unquote(strings.TrimSpace(f))
		a := s.attrs[i]
		switch {
		case i == s.labelCol:
			y, err := s.opts.Labels.label(v)
			if err == nil && a.values != nil && v != "?" && !slices.Contains(a.values, v) {
				err = fmt.Errorf("class %q is not one of {%s}", v, strings.Join(a.values, ","))
			}
			if err != nil {
				return Example{}, posError(s.path, s.line, col, "%v", err)
			}
			ex.Label = y
		case v == "?":
			return Example{}, posError(s.path, s.line, col, "missing value for %s", a.name)
		case a.values == nil:
			fv, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(fv) || math.IsInf(fv, 0) {
				return Example{}, posError(s.path, s.line, col, "%s = %q is not a finite number", a.name, v)
			}
			x[a.offset] = fv
		default:
			k := -1
			for j, nv := range a.values {
				if nv == v {
					k = j
				}
			}
			switch {
			case k < 0:
				return Example{}, posError(s.path, s.line, col, "%s = %q is not one of {%s}", a.name, v, strings.Join(a.values, ","))
			case a.nums != nil:
				x[a.offset] = a.nums[k]
			case a.binary:
				x[a.offset] = float64(k)
			default:
				x[a.offset+k] = 1
			}
		}
		col += len(f) + 1
	}
	var err error
	if ex.X, err = learners.NewDense(x); err != nil {
		return Example{}, posError(s.path, s.line, 0, "%v", err)
	}
	s.row++
	return ex, nil
}
