package streams

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ErrFormat reports malformed input data; the message names file, line and column.
var ErrFormat = errors.New("malformed input")

// ErrOption reports reader options that cannot work: no positive label value,
// a label column that does not exist, conflicting options.
var ErrOption = errors.New("invalid reader option")

// openData opens path for reading, decompressing gzip transparently (detected
// by its magic bytes, so a .gz suffix is not required).
func openData(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 1<<16)
	magic, _ := br.Peek(2)
	if !bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		return readCloser{br, f}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return readCloser{zr, multiCloser{zr, f}}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var errs []error
	for _, c := range m {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// LabelMap turns a raw label value into −1/+1, explicitly: the value equal to
// Positive is +1; with Negative set, only that value is −1 and anything else
// is an error; without it, every other value is −1. An empty value or "?" is
// an unlabeled event (0).
type LabelMap struct {
	Positive string
	Negative string
}

func (m LabelMap) label(raw string) (int, error) {
	raw = strings.TrimSpace(raw)
	switch {
	case raw == "" || raw == "?":
		return 0, nil
	case raw == m.Positive:
		return 1, nil
	case m.Negative == "" || raw == m.Negative:
		return -1, nil
	}
	return 0, fmt.Errorf("label %q is neither the positive %q nor the negative %q", raw, m.Positive, m.Negative)
}

func (m LabelMap) check() error {
	if m.Positive == "" {
		return fmt.Errorf("no positive label value: say which value is +1 (for example -positive UP or -positive 1): %w", ErrOption)
	}
	return nil
}

// posError is a format error at a position in a file.
func posError(path string, line, col int, format string, args ...any) error {
	where := fmt.Sprintf("%s:%d", path, line)
	if col > 0 {
		where += fmt.Sprintf(":%d", col)
	}
	return fmt.Errorf("%s: %s: %w", where, fmt.Sprintf(format, args...), ErrFormat)
}

// newCSVReader returns an encoding/csv reader tolerant of the usual quirks:
// variable field counts are checked by the caller (with positions), leading
// spaces are trimmed, '%' and '#' lines are comments.
func newCSVReader(r io.Reader, comment rune) *csv.Reader {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	cr.Comment = comment
	cr.LazyQuotes = true
	return cr
}
