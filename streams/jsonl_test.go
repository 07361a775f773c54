package streams

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestJSONLReader(t *testing.T) {
	content := `{"id":"e-1","ts":"2026-11-21T10:00:00Z","x":[0.5,1],"label":1}
{"id":"e-2","x":[0,2]}

{"id":"e-2","label":0}
`
	src, err := OpenJSONL(writeFile(t, "e.jsonl", content, true), JSONLOptions{Dim: 2})
	if err != nil {
		t.Fatal(err)
	}
	exs := drainAny(t, src)
	if len(exs) != 3 || exs[0].Label != 1 || exs[0].Time.IsZero() || exs[1].Label != 0 || !exs[2].LabelRecord || exs[2].Label != -1 || exs[2].ID != "e-2" {
		t.Fatalf("%+v", exs)
	}
	hashed, err := OpenJSONL(writeFile(t, "h.jsonl", `{"id":"a","features":{"amount":3,"country=FR":1}}`+"\n", false), JSONLOptions{HashBits: 8})
	if err != nil {
		t.Fatal(err)
	}
	if exs := drainAny(t, hashed); hashed.Dim() != 256 || exs[0].X.NNZ() != 2 {
		t.Fatalf("hashed: %+v", exs)
	}
	bad := []struct{ content, frag string }{
		{`{"id":"a","x":[1,2]}` + "\n" + `{"id":"b","x":[1]}`, "b.jsonl:2: \"x\" has 1 entries"},
		{`{"id":"a","x":[1,2],"label":5}`, "b.jsonl:1: \"label\" 5"},
		{`{"id":"a","x":[1,2]`, "b.jsonl:1: malformed JSON"},
		{`{"id":"a","features":{"k":1}}`, "hash bits"},
	}
	for _, b := range bad {
		src, err := OpenJSONL(writeFile(t, "b.jsonl", b.content+"\n", false), JSONLOptions{Dim: 2})
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = src.Next(t.Context())
		}
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), b.frag) {
			t.Errorf("%q: err = %v, want %q", b.content, err, b.frag)
		}
	}
	if _, err := OpenJSONL("x.jsonl", JSONLOptions{}); !errors.Is(err, ErrOption) {
		t.Fatalf("no dimension: %v", err)
	}
}

// A key field names each line's entity; it is taken out before the event
// is decoded (docs/spec/DESIGN.md §2 events carry no key), and a line without one is an
// error with its position.
func TestJSONLKeyField(t *testing.T) {
	content := `{"id":"e-1","customer":"c7","x":[0.5,1],"label":1}
{"customer":"c9","id":"e-1","label":-1}
`
	src, err := OpenJSONL(writeFile(t, "k.jsonl", content, false), JSONLOptions{Dim: 2, KeyField: "customer"})
	if err != nil {
		t.Fatal(err)
	}
	exs := drainAny(t, src)
	if len(exs) != 2 || exs[0].Key != "c7" || exs[1].Key != "c9" || !exs[1].LabelRecord || exs[0].X.Dense()[1] != 1 {
		t.Fatalf("%+v", exs)
	}
	for _, tc := range []struct{ content, frag string }{
		{`{"id":"a","x":[1,2]}`, `k.jsonl:1: no key field "customer"`},
		{`{"id":"a","customer":7,"x":[1,2]}`, `key field "customer" = 7: must be a non-empty string`},
	} {
		src, err := OpenJSONL(writeFile(t, "k.jsonl", tc.content+"\n", false), JSONLOptions{Dim: 2, KeyField: "customer"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Next(context.Background()); err == nil || !strings.Contains(err.Error(), tc.frag) {
			t.Errorf("%s: err %v, want %q", tc.content, err, tc.frag)
		}
	}
}
