package streams

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/driftstream/driftstream/topics"
)

// JSONLOptions says how to turn JSONL events (docs/spec/DESIGN.md §2) into inputs.
type JSONLOptions struct {
	// Dim is the length of dense "x" inputs.
	Dim int
	// HashBits, when > 0, hashes named "features" into 2^HashBits buckets.
	HashBits int
	// MaxBytes bounds one line (0: topics.DefaultMaxBytes).
	MaxBytes int
	// KeyField, when set, names a string field of every line holding the
	// entity key (the Kafka record key, which docs/spec/DESIGN.md §2 events do not carry);
	// it is taken out before the event is decoded.
	KeyField string
}

// jsonlSource streams one event per line; label records become examples with
// LabelRecord set.
type jsonlSource struct {
	path   string
	sc     *bufio.Scanner
	closer io.Closer
	vec    topics.Vectorizer
	max    int
	key    string
	line   int
	done   bool
}

// OpenJSONL opens a JSONL file of docs/spec/DESIGN.md §2 events (.gz read transparently).
func OpenJSONL(path string, opts JSONLOptions) (Source, error) {
	vec, err := topics.NewVectorizer(opts.Dim, opts.HashBits)
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", path, err, ErrOption)
	}
	rc, err := openData(path)
	if err != nil {
		return nil, err
	}
	max := opts.MaxBytes
	if max <= 0 {
		max = topics.DefaultMaxBytes
	}
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), max+1)
	return &jsonlSource{path: path, sc: sc, closer: rc, vec: vec, max: max, key: opts.KeyField}, nil
}

func (s *jsonlSource) Dim() int { return s.vec.Dim }

func (s *jsonlSource) Next(ctx context.Context) (Example, error) {
	if err := ctx.Err(); err != nil {
		return Example{}, err
	}
	for !s.done && s.sc.Scan() {
		s.line++
		b := s.sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var key string
		if s.key != "" {
			var err error
			if key, b, err = takeKey(b, s.key); err != nil {
				return Example{}, posError(s.path, s.line, 0, "%v", err)
			}
		}
		ev, err := topics.Decode(b, s.max)
		if err != nil {
			return Example{}, posError(s.path, s.line, 0, "%v", err)
		}
		ex := Example{ID: ev.ID, Key: key, Time: ev.TS, Label: ev.Label, LabelRecord: ev.Kind == topics.LabelRecord}
		if !ex.LabelRecord {
			if ex.X, err = s.vec.Vector(ev); err != nil {
				return Example{}, posError(s.path, s.line, 0, "%v", err)
			}
		}
		return ex, nil
	}
	if !s.done {
		s.done = true
		s.closer.Close()
		if err := s.sc.Err(); err != nil {
			return Example{}, fmt.Errorf("%s:%d: %w", s.path, s.line+1, err)
		}
	}
	return Example{}, io.EOF
}

// takeKey removes the string field name from the JSON object b and returns
// its value and the object without it.
func takeKey(b []byte, name string) (string, []byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return "", nil, fmt.Errorf("malformed JSON: %v", err)
	}
	raw, ok := obj[name]
	if !ok {
		return "", nil, fmt.Errorf("no key field %q", name)
	}
	var key string
	if err := json.Unmarshal(raw, &key); err != nil || key == "" {
		return "", nil, fmt.Errorf("key field %q = %s: must be a non-empty string", name, raw)
	}
	delete(obj, name)
	rest, err := json.Marshal(obj)
	return key, rest, err
}
