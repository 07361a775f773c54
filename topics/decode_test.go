package topics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// wire is the JSON shape; pointers tell absent fields from zero values.
type wire struct {
	ID       *string            `json:"id"`
	TS       *string            `json:"ts"`
	X        []float64          `json:"x"`
	Features map[string]float64 `json:"features"`
	Label    *int               `json:"label"`
}

// decodeReflect is the encoding/json decoder that Decode replaced, kept as
// the reference Decode must agree with. maxBytes ≤ 0 means
// DefaultMaxBytes. Unknown fields are rejected so that a misspelt "lable"
// cannot silently turn a labeled event into an unlabeled one.
func decodeReflect(b []byte, maxBytes int) (Event, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(b) > maxBytes {
		return Event{}, fmt.Errorf("event of %d bytes exceeds the limit of %d: %w", len(b), maxBytes, ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var w wire
	if err := dec.Decode(&w); err != nil {
		return Event{}, fmt.Errorf("malformed JSON: %v: %w", err, ErrInvalid)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Event{}, fmt.Errorf("trailing data after the JSON object: %w", ErrInvalid)
	}
	var ev Event
	if w.ID == nil || *w.ID == "" {
		return Event{}, fmt.Errorf(`missing "id": %w`, ErrInvalid)
	}
	if len(*w.ID) > MaxIDBytes {
		return Event{}, fmt.Errorf(`"id" of %d bytes exceeds the limit of %d: %w`, len(*w.ID), MaxIDBytes, ErrInvalid)
	}
	ev.ID = *w.ID
	if w.TS != nil {
		ts, err := time.Parse(time.RFC3339Nano, *w.TS)
		if err != nil {
			return Event{}, fmt.Errorf(`"ts" %q is not RFC 3339: %w`, *w.TS, ErrInvalid)
		}
		ev.TS = ts
	}
	if w.Label != nil {
		switch *w.Label {
		case 1:
			ev.Label = 1
		case 0, -1:
			ev.Label = -1
		default:
			return Event{}, fmt.Errorf(`"label" %d: must be -1, 0 or +1: %w`, *w.Label, ErrInvalid)
		}
	}
	switch {
	case w.X != nil && w.Features != nil:
		return Event{}, fmt.Errorf(`both "x" and "features": give exactly one: %w`, ErrInvalid)
	case w.X == nil && w.Features == nil:
		if w.Label == nil {
			return Event{}, fmt.Errorf(`neither "x" nor "features" nor "label": %w`, ErrInvalid)
		}
		ev.Kind = LabelRecord
	case w.X != nil:
		if len(w.X) == 0 {
			return Event{}, fmt.Errorf(`empty "x": %w`, ErrInvalid)
		}
		ev.X = w.X
	default:
		if len(w.Features) == 0 {
			return Event{}, fmt.Errorf(`empty "features": %w`, ErrInvalid)
		}
		for name, v := range w.Features {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return Event{}, fmt.Errorf("feature %q = %v: %w", name, v, ErrInvalid)
			}
		}
		ev.Features = w.Features
	}
	return ev, nil
}

// FuzzDecodeAgreesWithEncodingJSON: on any input, Decode never panics;
// what it accepts, encoding/json accepts as the same event; what only
// encoding/json accepts holds a duplicate field, a field name in another
// case, invalid UTF-8 or a lone surrogate, which Decode refuses on purpose.
func FuzzDecodeAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"id":"e1","x":[1,2.5,-3e-7],"label":1}`,
		`{"id":"e2","features":{"a":1,"b":-0.5},"ts":"2026-01-02T03:04:05.123Z"}`,
		`{"id":"e3","label":0}`, `{"id":"\u00e9\ud83d\ude00","x":[0]}`, `{"ID":"a","x":[1]}`,
		`{"id":"a","id":"b","x":[1]}`, `{"id":"a","x":null,"label":-1}`, ` {"id" : "a" , "x" : [ 1 , 2 ] } `,
		`{"id":"a","x":[1e400]}`, `{"id":"a","label":1.0,"x":[1]}`, `{"id":"a","x":[01]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Decode(b, 1<<16)
		want, werr := decodeReflect(b, 1<<16)
		switch {
		case err == nil && werr != nil:
			// The one rule looser than encoding/json's: a label written as a
			// float equal to -1, 0 or 1.
			if !strings.Contains(werr.Error(), "Go struct field wire.label of type int") {
				t.Fatalf("Decode accepts what encoding/json refuses (%v): %q", werr, b)
			}
		case err == nil:
			if !sameEvent(got, want) {
				t.Fatalf("%q:\nDecode        %+v\nencoding/json %+v", b, got, want)
			}
		case werr == nil:
			msg := err.Error()
			if !strings.Contains(msg, "given twice") && !strings.Contains(msg, "unknown field") && !strings.Contains(msg, "UTF") &&
				!strings.Contains(msg, "surrogate") && !strings.Contains(msg, "empty feature name") {
				t.Fatalf("Decode refuses what encoding/json accepts: %v: %q", err, b)
			}
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("an error without ErrInvalid: %v", err)
		}
	})
}

func sameEvent(a, b Event) bool {
	if !a.TS.Equal(b.TS) {
		return false
	}
	a.TS, b.TS = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// The strict cases, one by one.
func TestDecodeIsStrict(t *testing.T) {
	for _, tc := range []struct{ in, frag string }{
		{`{"id":"a","id":"b","x":[1]}`, "given twice"},
		{`{"Id":"a","x":[1]}`, "unknown field"},
		{"{\"id\":\"a\xff\",\"x\":[1]}", "invalid UTF-8"},
		{`{"id":"\ud83d","x":[1]}`, "surrogate"},
		{`{"id":"a","features":{"f":1,"f":2}}`, "given twice"},
		{`{"id":"a","features":{"":1}}`, "empty feature name"},
		{`{"id":"a","features":{"f":null}}`, "malformed JSON"},
		{`{"id":"a","x":[1e400]}`, "out of range"},
		{`{"id":"a","x":[01]}`, "malformed JSON"},
		{`{"id":"a","label":1.5,"x":[1]}`, `"label" 1.5: must be -1, 0 or +1`},
		{`{"id":"a","label":2,"x":[1]}`, `"label" 2: must be -1, 0 or +1`},
		{`{"id":"a","x":[1,]}`, "malformed JSON"},
		{`{"id":"a","x":[1]}x`, "trailing data"},
	} {
		if _, err := Decode([]byte(tc.in), 0); err == nil || !strings.Contains(err.Error(), tc.frag) {
			t.Errorf("%s: err %v, want %q", tc.in, err, tc.frag)
		}
	}
	for in, want := range map[string]int{`{"id":"a","label":-1.0}`: -1, `{"id":"a","label":1e0}`: 1, `{"id":"a","label":0.0}`: -1} {
		if ev, err := Decode([]byte(in), 0); err != nil || ev.Label != want {
			t.Errorf("%s: label %d, %v; want %d", in, ev.Label, err, want)
		}
	}
	ev, err := Decode([]byte(`{"id":"\u00e9\ud83d\ude00\n","x":[1],"ts":null,"label":null}`), 0)
	if err != nil || ev.ID != "é😀\n" || !ev.TS.IsZero() || ev.Label != 0 || !utf8.ValidString(ev.ID) {
		t.Fatalf("escapes and nulls: %+v, %v", ev, err)
	}
}

// Decode of a d=50 dense labeled event: the goal is ≤ 1.5 µs and ≤ 2
// allocations; encoding/json is the reference.
//
//	go test -run '^$' -bench Decode -benchmem ./topics
func BenchmarkDecode(b *testing.B) {
	x := make([]float64, 50)
	for i := range x {
		x[i] = math.Sin(float64(i)) * 3.7
	}
	xs, _ := json.Marshal(x)
	ev := fmt.Appendf(nil, `{"id":"event-1029384","ts":"2026-11-21T10:00:00Z","x":%s,"label":1}`, xs)
	evNoTS := fmt.Appendf(nil, `{"id":"event-1029384","x":%s,"label":1}`, xs)
	for i := range x { // readings with four decimals, as sensors and features give
		x[i] = math.Round(x[i]*1e4) / 1e4
	}
	short, _ := json.Marshal(x)
	evShort := fmt.Appendf(nil, `{"id":"event-1029384","x":%s,"label":1}`, short)
	for _, bc := range []struct {
		name string
		in   []byte
		fn   func([]byte, int) (Event, error)
	}{{"fixed-schema/17-digit", evNoTS, Decode}, {"fixed-schema/17-digit+ts", ev, Decode}, {"fixed-schema/4-decimal", evShort, Decode},
		{"encoding-json/17-digit", evNoTS, decodeReflect}, {"encoding-json/4-decimal", evShort, decodeReflect}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.fn(bc.in, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
