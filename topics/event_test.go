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

// WithBias appends a constant coordinate 1 to every input — after dense x,
// after the hashed buckets, and after dense x within the hashed space — and
// Dim counts it: the learner sees exactly what a source's extra feature 1
// would give (backtests' -bias).
func TestVectorizerWithBias(t *testing.T) {
	dense, _ := NewVectorizer(3, 0)
	hashed, _ := NewVectorizer(0, 4)
	both, _ := NewVectorizer(2, 4)
	for _, tc := range []struct {
		name string
		v    Vectorizer
		ev   Event
		want map[int]float64
		dim  int
	}{
		{"dense", dense.WithBias(), Event{Kind: Input, X: []float64{0.5, -2, 3}}, map[int]float64{0: 0.5, 1: -2, 2: 3, 3: 1}, 4},
		{"dense x in hashed space", both.WithBias(), Event{Kind: Input, X: []float64{7, 8}}, map[int]float64{0: 7, 1: 8, 16: 1}, 17},
		{"twice is once", dense.WithBias().WithBias(), Event{Kind: Input, X: []float64{1, 1, 1}}, map[int]float64{0: 1, 1: 1, 2: 1, 3: 1}, 4},
	} {
		x, err := tc.v.Vector(tc.ev)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := map[int]float64{}
		x.Entries(func(i int, v float64) {
			if v != 0 {
				got[i] = v
			}
		})
		if x.Dim() != tc.dim || tc.v.Dim != tc.dim || len(got) != len(tc.want) {
			t.Fatalf("%s: dim %d (vectorizer %d), entries %v; want %d, %v", tc.name, x.Dim(), tc.v.Dim, got, tc.dim, tc.want)
		}
		for i, v := range tc.want {
			if got[i] != v {
				t.Fatalf("%s: entries %v, want %v", tc.name, got, tc.want)
			}
		}
	}
	// Named features: hashed into the 16 buckets, the bias at 16.
	hb := hashed.WithBias()
	x, err := hb.Vector(Event{Kind: Input, Features: map[string]float64{"a": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if x.Dim() != 17 || x.At(16) != 1 || x.NNZ() != 2 {
		t.Fatalf("hashed with bias: dim %d, bias %v, %d entries", x.Dim(), x.At(16), x.NNZ())
	}
	// The dense dimension checked is the input's, not the learner's.
	if _, err := dense.WithBias().Vector(Event{Kind: Input, X: []float64{1, 2, 3, 4}}); err == nil || !strings.Contains(err.Error(), "configured dimension is 3") {
		t.Fatalf("4 entries for dimension 3 with bias: %v", err)
	}
}
