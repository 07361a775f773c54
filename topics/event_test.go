package topics

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		in   string
		kind Kind
		lab  int
		frag string // non-empty: expected error fragment
	}{
		{`{"id": "e-1029", "ts": "2026-11-21T10:00:00Z", "x": [0.12, -1.5, 3.0], "label": 1}`, Input, 1, ""},
		{`{"id": "e-1030", "features": {"amount": 12.5, "country=FR": 1}}`, Input, 0, ""},
		{`{"id": "e-1030", "label": -1}`, LabelRecord, -1, ""},
		{`{"id": "e-7", "x": [1], "label": 0}`, Input, -1, ""},
		{`{"id": "e-1", "x": [1], "lable": 1}`, 0, 0, `unknown field "lable"`},
		{`{"x": [1]}`, 0, 0, `missing "id"`},
		{`{"id": ""}`, 0, 0, `missing "id"`},
		{`{"id": "` + strings.Repeat("i", MaxIDBytes+1) + `", "x": [1]}`, 0, 0, `"id" of 257 bytes exceeds the limit of 256`},
		{`{"id": "` + strings.Repeat("i", MaxIDBytes) + `", "x": [1]}`, Input, 0, ""},
		{`{"id": "a"}`, 0, 0, `neither "x" nor "features" nor "label"`},
		{`{"id": "a", "x": [1], "features": {"a": 1}}`, 0, 0, "exactly one"},
		{`{"id": "a", "x": []}`, 0, 0, `empty "x"`},
		{`{"id": "a", "x": [1], "label": 2}`, 0, 0, "must be -1, 0 or +1"},
		{`{"id": "a", "x": [1], "ts": "yesterday"}`, 0, 0, "RFC 3339"},
		{`{"id": "a", "x": [1e400]}`, 0, 0, "malformed JSON"},
		{`{"id": "a", "x": ["1"]}`, 0, 0, "malformed JSON"},
		{`{"id": "a", "x": [1]} {"id": "b"}`, 0, 0, "trailing data"},
		{`not json`, 0, 0, "malformed JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			ev, err := Decode([]byte(tc.in), 0)
			if tc.frag != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.frag) {
					t.Fatalf("err = %v, want %q", err, tc.frag)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind != tc.kind || ev.Label != tc.lab {
				t.Fatalf("%+v", ev)
			}
		})
	}
	if _, err := Decode([]byte(`{"id":"a","x":[1]}`), 10); err == nil || !strings.Contains(err.Error(), "exceeds the limit of 10") {
		t.Fatalf("oversized: %v", err)
	}
}

func TestVectorizer(t *testing.T) {
	dense, err := NewVectorizer(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := Decode([]byte(`{"id":"a","x":[1,2,3]}`), 0)
	if x, err := dense.Vector(ev); err != nil || x.Dim() != 3 {
		t.Fatalf("%v %v", x, err)
	}
	short, _ := Decode([]byte(`{"id":"a","x":[1,2]}`), 0)
	if _, err := dense.Vector(short); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "2 entries") {
		t.Fatalf("wrong dimension: %v", err)
	}
	named, _ := Decode([]byte(`{"id":"b","features":{"amount":12.5}}`), 0)
	if _, err := dense.Vector(named); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "hash bits") {
		t.Fatalf("features without hashing: %v", err)
	}
	hashed, err := NewVectorizer(0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if x, err := hashed.Vector(named); err != nil || x.Dim() != 1024 || x.NNZ() != 1 {
		t.Fatalf("%v %v", x, err)
	}
	// Both kinds in one deployment: dense x fills the first coordinates of
	// the hashed space.
	both, err := NewVectorizer(3, 10)
	if err != nil {
		t.Fatal(err)
	}
	x, err := both.Vector(ev)
	if err != nil || x.Dim() != 1024 || x.NNZ() != 3 {
		t.Fatalf("dense x in the hashed space: %v %v", x, err)
	}
	var at []int
	x.Entries(func(i int, v float64) { at = append(at, i) })
	if fmt.Sprint(at) != "[0 1 2]" {
		t.Fatalf("dense x at coordinates %v, want the first three", at)
	}
	if x, err := both.Vector(named); err != nil || x.Dim() != 1024 || x.NNZ() != 1 {
		t.Fatalf("named features: %v %v", x, err)
	}
	if _, err := both.Vector(short); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "configured dimension is 3") {
		t.Fatalf("wrong dense dimension: %v", err)
	}
	for _, c := range [][2]int{{0, 0}, {1025, 10}, {0, 40}} {
		if _, err := NewVectorizer(c[0], c[1]); err == nil {
			t.Errorf("NewVectorizer(%d, %d): no error", c[0], c[1])
		}
	}
}
