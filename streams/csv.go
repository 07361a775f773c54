package streams

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/driftstream/driftstream/learners"
)

// CSVOptions says how to read a CSV file. Nothing is guessed: the label column
// and its positive value are given explicitly.
type CSVOptions struct {
	// Header is true when the first row names the columns.
	Header bool
	// Label is the label column: a header name, a 1-based index, "first" or
	// "last"; empty when the file has no label column (unlabeled events, or
	// labels in LabelFile).
	Label string
	// Labels maps raw label values to −1/+1.
	Labels LabelMap
	// LabelFile, when set, holds the labels one per line, row for row (the
	// shared SEA data keeps them apart from the features).
	LabelFile string
	// Key is an optional column holding the entity key (name or 1-based index).
	Key string
	// RawClass keeps the label column's raw value in Example.Class instead of
	// mapping it (multiclass files; Labels is then not used).
	RawClass bool
}

// csvSource streams a CSV file. Columns other than label and key are numeric
// features.
type csvSource struct {
	path, labelPath string
	opts            CSVOptions
	r               *csv.Reader
	closer          io.Closer
	labels          *csv.Reader
	labelCloser     io.Closer
	dim             int
	labelCol        int // -1: none
	keyCol          int // -1: none
	row             int
	first           []string // first data row, read ahead to size the stream
	done            bool
}

// OpenCSV opens a CSV stream. The dimension is the number of columns of the
// first data row minus the label and key columns; every row must match it.
func OpenCSV(path string, opts CSVOptions) (Source, error) {
	if (opts.Label != "" || opts.LabelFile != "") && !opts.RawClass {
		if err := opts.Labels.check(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if opts.Label != "" && opts.LabelFile != "" {
		return nil, fmt.Errorf("%s: both a label column and a label file given; choose one: %w", path, ErrOption)
	}
	rc, err := openData(path)
	if err != nil {
		return nil, err
	}
	s := &csvSource{path: path, opts: opts, r: newCSVReader(rc, '#'), closer: rc, labelCol: -1, keyCol: -1}
	var header []string
	if opts.Header {
		rec, err := s.r.Read()
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("%s: reading the header: %w", path, err)
		}
		header = append([]string(nil), rec...)
	}
	first, err := s.r.Read()
	if err != nil {
		rc.Close()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: no data rows: %w", path, ErrFormat)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.first = append([]string(nil), first...)
	ncol := len(first)
	if header != nil && len(header) != ncol {
		rc.Close()
		return nil, posError(path, 2, 0, "%d fields, header has %d", ncol, len(header))
	}
	if s.labelCol, err = column(opts.Label, header, ncol); err != nil {
		rc.Close()
		return nil, fmt.Errorf("%s: label column: %v: %w", path, err, ErrOption)
	}
	if s.keyCol, err = column(opts.Key, header, ncol); err != nil {
		rc.Close()
		return nil, fmt.Errorf("%s: key column: %v: %w", path, err, ErrOption)
	}
	s.dim = ncol
	for _, c := range []int{s.labelCol, s.keyCol} {
		if c >= 0 {
			s.dim--
		}
	}
	if s.dim < 1 {
		rc.Close()
		return nil, fmt.Errorf("%s: no feature columns left: %w", path, ErrFormat)
	}
	if opts.LabelFile != "" {
		lr, err := openData(opts.LabelFile)
		if err != nil {
			rc.Close()
			return nil, err
		}
		s.labels, s.labelCloser, s.labelPath = newCSVReader(lr, '#'), lr, opts.LabelFile
	}
	return s, nil
}

// column resolves a column spec against the header.
func column(spec string, header []string, ncol int) (int, error) {
	switch spec {
	case "":
		return -1, nil
	case "first":
		return 0, nil
	case "last":
		return ncol - 1, nil
	}
	if i, err := strconv.Atoi(spec); err == nil {
		if i < 1 || i > ncol {
			return 0, fmt.Errorf("index %d out of range [1, %d]", i, ncol)
		}
		return i - 1, nil
	}
	for i, h := range header {
		if strings.TrimSpace(h) == spec {
			return i, nil
		}
	}
	if header == nil {
		return 0, fmt.Errorf("%q is not a column index and the file has no header (use a 1-based index, first or last)", spec)
	}
	return 0, fmt.Errorf("no column %q; columns: %s", spec, strings.Join(header, ", "))
}

func (s *csvSource) Dim() int { return s.dim }

func (s *csvSource) Next(ctx context.Context) (Example, error) {
	if err := ctx.Err(); err != nil {
		return Example{}, err
	}
	if s.done {
		return Example{}, io.EOF
	}
	var rec []string
	if s.first != nil {
		rec, s.first = s.first, nil
	} else {
		var err error
		if rec, err = s.r.Read(); err != nil {
			if errors.Is(err, io.EOF) {
				return Example{}, s.end()
			}
			return Example{}, fmt.Errorf("%s: %w", s.path, err)
		}
	}
	line, _ := s.r.FieldPos(0)
	if len(rec) != s.dim+btoi(s.labelCol >= 0)+btoi(s.keyCol >= 0) {
		return Example{}, posError(s.path, line, 0, "%d fields, expected %d", len(rec), s.dim+btoi(s.labelCol >= 0)+btoi(s.keyCol >= 0))
	}
	x := make([]float64, 0, s.dim)
	ex := Example{ID: strconv.Itoa(s.row)}
	for c, f := range rec {
		_, col := s.r.FieldPos(c)
		switch c {
		case s.labelCol:
			if s.opts.RawClass {
				ex.Class = strings.TrimSpace(f)
				continue
			}
			y, err := s.opts.Labels.label(f)
			if err != nil {
				return Example{}, posError(s.path, line, col, "%v", err)
			}
			ex.Label = y
		case s.keyCol:
			ex.Key = f
		default:
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return Example{}, posError(s.path, line, col, "feature %q is not a finite number", f)
			}
			x = append(x, v)
		}
	}
	if s.labels != nil {
		lrec, err := s.labels.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return Example{}, fmt.Errorf("%s: label file ends before data row %d: %w", s.labelPath, s.row+1, ErrFormat)
			}
			return Example{}, fmt.Errorf("%s: %w", s.labelPath, err)
		}
		lline, _ := s.labels.FieldPos(0)
		if len(lrec) != 1 {
			return Example{}, posError(s.labelPath, lline, 0, "%d fields, expected one label", len(lrec))
		}
		if ex.Label, err = s.opts.Labels.label(lrec[0]); err != nil {
			return Example{}, posError(s.labelPath, lline, 1, "%v", err)
		}
	}
	var err error
	if ex.X, err = learners.NewDense(x); err != nil {
		return Example{}, posError(s.path, line, 0, "%v", err)
	}
	s.row++
	return ex, nil
}

// end closes the files at EOF and checks that a label file has no extra rows.
func (s *csvSource) end() error {
	s.done = true
	defer s.Close()
	if s.labels != nil {
		if _, err := s.labels.Read(); err == nil {
			return fmt.Errorf("%s: more labels than the %d data rows of %s: %w", s.labelPath, s.row, s.path, ErrFormat)
		}
	}
	return io.EOF
}

// Close releases the files; Next returns io.EOF after the last row.
func (s *csvSource) Close() error {
	var errs []error
	if s.closer != nil {
		errs = append(errs, s.closer.Close())
		s.closer = nil
	}
	if s.labelCloser != nil {
		errs = append(errs, s.labelCloser.Close())
		s.labelCloser = nil
	}
	return errors.Join(errs...)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
