package topics

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner reads the one JSON object of the docs/spec/DESIGN.md §2 schema without
// reflection: the bytes are walked once, numbers go to strconv, and the only
// allocations are the id, the ts, the x slice and the features map.
type scanner struct {
	b   []byte
	i   int
	buf [64]float64 // x values before their exact-size copy
}

// syntaxError is a malformed-JSON error at the scanner's position.
func (s *scanner) syntaxError(what string) error {
	return fmt.Errorf("malformed JSON: %s at byte %d: %w", what, s.i, ErrInvalid)
}

func (s *scanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// expect consumes byte c after optional space.
func (s *scanner) expect(c byte) error {
	s.skipSpace()
	if s.i >= len(s.b) || s.b[s.i] != c {
		return s.syntaxError(fmt.Sprintf("expected %q", c))
	}
	s.i++
	return nil
}

// peek returns the next non-space byte (0 at the end).
func (s *scanner) peek() byte {
	s.skipSpace()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// null consumes a JSON null when one comes next.
func (s *scanner) null() bool {
	if s.peek() == 'n' && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// rawString returns the bytes of the next string without its quotes, and
// whether it holds escapes (then decode them with unquote).
func (s *scanner) rawString() ([]byte, bool, error) {
	if err := s.expect('"'); err != nil {
		return nil, false, err
	}
	start, escaped := s.i, false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			if !escaped && !utf8.Valid(raw) {
				return nil, false, fmt.Errorf("invalid UTF-8 in a string: %w", ErrInvalid)
			}
			return raw, escaped, nil
		case c == '\\':
			escaped = true
			s.i += 2
		case c < 0x20:
			return nil, false, s.syntaxError("control character in a string")
		default:
			s.i++
		}
	}
	return nil, false, s.syntaxError("unterminated string")
}

// str returns the next string, unescaped.
func (s *scanner) str() (string, error) {
	raw, escaped, err := s.rawString()
	if err != nil {
		return "", err
	}
	if !escaped {
		return string(raw), nil
	}
	return unquote(raw)
}

// unquote decodes the escapes of a string's content.
func unquote(raw []byte) (string, error) {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				return "", fmt.Errorf("invalid UTF-8 in a string: %w", ErrInvalid)
			}
			out = append(out, raw[i:i+size]...)
			i += size
			continue
		}
		if i+1 >= len(raw) {
			return "", fmt.Errorf("malformed JSON: bad escape: %w", ErrInvalid)
		}
		switch e := raw[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(raw[i+2:])
			if !ok {
				return "", fmt.Errorf("malformed JSON: bad \\u escape: %w", ErrInvalid)
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if r2, ok = hex4(raw[i+2:]); ok {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							out = utf8.AppendRune(out, d)
							i += 6
							continue
						}
					}
				}
				return "", fmt.Errorf("a lone UTF-16 surrogate in a string: %w", ErrInvalid)
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", fmt.Errorf("malformed JSON: bad escape \\%c: %w", e, ErrInvalid)
		}
		i += 2
	}
	return string(out), nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number returns the next JSON number token, checked against the grammar.
func (s *scanner) number() ([]byte, error) {
	s.skipSpace()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && '1' <= s.b[s.i] && s.b[s.i] <= '9':
		for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
			s.i++
		}
	default:
		return nil, s.syntaxError("expected a number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return nil, s.syntaxError("expected digits after '.'")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return nil, s.syntaxError("expected exponent digits")
		}
	}
	return s.b[start:s.i], nil
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// pow10 are the powers of ten that float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
	1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// float parses the next number; out-of-range values are an error, as
// encoding/json makes them.
func (s *scanner) float() (float64, error) {
	s.skipSpace()
	if n, v, ok := numberPrefix(s.b[s.i:]); ok {
		s.i += n
		return v, nil
	}
	tok, err := s.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(string(tok), 64) // no allocation: the conversion is not kept
	if err != nil || math.IsInf(v, 0) {
		return 0, fmt.Errorf("malformed JSON: number %s out of range: %w", excerptBytes(tok), ErrInvalid)
	}
	return v, nil
}

// floats reads an array of numbers.
func (s *scanner) floats() ([]float64, error) {
	if err := s.expect('['); err != nil {
		return nil, err
	}
	vals := s.buf[:0]
	if s.peek() == ']' {
		s.i++
		return []float64{}, nil
	}
	for {
		v, err := s.float()
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			out := make([]float64, len(vals))
			copy(out, vals)
			return out, nil
		default:
			return nil, s.syntaxError("expected ',' or ']' in an array")
		}
	}
}

// features reads an object of named numbers.
func (s *scanner) features() (map[string]float64, error) {
	if err := s.expect('{'); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	if s.peek() == '}' {
		s.i++
		return out, nil
	}
	for {
		name, err := s.str()
		if err != nil {
			return nil, err
		}
		if name == "" { // a producer's bug (an unset column name), not a feature
			return nil, fmt.Errorf("empty feature name: %w", ErrInvalid)
		}
		if err := s.expect(':'); err != nil {
			return nil, err
		}
		v, err := s.float()
		if err != nil {
			return nil, err
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("feature %s given twice: %w", Excerpt(name), ErrInvalid)
		}
		out[name] = v
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return out, nil
		default:
			return nil, s.syntaxError("expected ',' or '}' in features")
		}
	}
}

// decodeWire parses the object into w: field names must match exactly, and
// each may come once; null leaves a field absent, as encoding/json does.
func decodeWire(b []byte, w *wireFields) error {
	s := scanner{b: b}
	if err := s.expect('{'); err != nil {
		return err
	}
	var seen [numFields]bool
	if s.peek() == '}' {
		s.i++
	} else {
		for {
			raw, escaped, err := s.rawString()
			if err != nil {
				return err
			}
			field, known := fieldIndex[string(raw)] // no allocation: the name is not kept
			if escaped {
				name, err := unquote(raw)
				if err != nil {
					return err
				}
				field, known = fieldIndex[name]
			}
			if !known {
				return fmt.Errorf("malformed JSON: json: unknown field %s: %w", excerptBytes(raw), ErrInvalid)
			}
			if seen[field] {
				return fmt.Errorf("malformed JSON: field %s given twice: %w", excerptBytes(raw), ErrInvalid)
			}
			seen[field] = true
			if err := s.expect(':'); err != nil {
				return err
			}
			if !s.null() {
				if err := w.read(&s, field); err != nil {
					return fmt.Errorf("field %q: %w", fieldNames[field], err)
				}
			}
			switch s.peek() {
			case ',':
				s.i++
				continue
			case '}':
				s.i++
			default:
				return s.syntaxError("expected ',' or '}' after a field")
			}
			break
		}
	}
	s.skipSpace()
	if s.i != len(s.b) {
		return fmt.Errorf("trailing data after the JSON object: %w", ErrInvalid)
	}
	return nil
}

// The fields of the schema, as indexes into wireFields.present.
const (
	fieldID = iota
	fieldTS
	fieldX
	fieldFeatures
	fieldLabel
	numFields
)

var fieldIndex = map[string]int{"id": fieldID, "ts": fieldTS, "x": fieldX, "features": fieldFeatures, "label": fieldLabel}

// fieldNames names the fields by index, for errors.
var fieldNames = [numFields]string{fieldID: "id", fieldTS: "ts", fieldX: "x", fieldFeatures: "features", fieldLabel: "label"}

// excerptBytes is Excerpt of a token the scanner holds as bytes.
func excerptBytes(b []byte) string { return Excerpt(string(b)) }

// wireFields is what the object holds, before validation; present marks
// the fields given with a value other than null.
type wireFields struct {
	present  [numFields]bool
	id, ts   string
	x        []float64
	features map[string]float64
	label    float64
}

func (w *wireFields) read(s *scanner, field int) error {
	var err error
	switch field {
	case fieldID:
		w.id, err = s.str()
	case fieldTS:
		w.ts, err = s.str()
	case fieldX:
		w.x, err = s.floats()
	case fieldFeatures:
		w.features, err = s.features()
	case fieldLabel:
		w.label, err = s.float() // Decode checks that it is -1, 0 or 1
	}
	w.present[field] = err == nil
	return err
}
