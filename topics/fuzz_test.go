package topics

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode: it never panics, whatever it
// accepts satisfies the contract (an id, a label in {−1, 0, +1}, exactly one
// of x and features for an input, finite values), and re-encoding an
// accepted event decodes to the same event.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"e1","x":[1,2.5,-3],"label":1}`,
		`{"id":"e2","features":{"a":1,"b":-0.5},"ts":"2026-01-02T03:04:05.123Z"}`,
		`{"id":"e3","label":0}`,
		`{"id":"","x":[1]}`,
		`{"id":"e4","x":[1e308,-1e308],"label":-1}`,
		`{"id":"e5","x":[1,2`,
		`{"id":"e6","lable":1,"x":[1]}`,
		`{"id":"e7","x":[1]} {"id":"e8"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := Decode(b, 1<<16)
		if err != nil {
			return
		}
		if ev.ID == "" || ev.Label < -1 || ev.Label > 1 {
			t.Fatalf("accepted %q as %+v", b, ev)
		}
		switch ev.Kind {
		case Input:
			if (ev.X == nil) == (ev.Features == nil) {
				t.Fatalf("input %q: x %v, features %v", b, ev.X, ev.Features)
			}
		case LabelRecord:
			if ev.X != nil || ev.Features != nil || ev.Label == 0 {
				t.Fatalf("label record %q as %+v", b, ev)
			}
		}
		for _, v := range ev.X {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("non-finite x accepted: %q", b)
			}
		}
		w := map[string]any{"id": ev.ID}
		if ev.Label != 0 {
			w["label"] = ev.Label
		}
		if !ev.TS.IsZero() {
			w["ts"] = ev.TS.Format("2006-01-02T15:04:05.999999999Z07:00")
		}
		if ev.X != nil {
			w["x"] = ev.X
		}
		if ev.Features != nil {
			w["features"] = ev.Features
		}
		again, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(again, 1<<20)
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", again, err)
		}
		if !back.TS.Equal(ev.TS) {
			t.Fatalf("ts changed over a round trip: %v, %v", back.TS, ev.TS)
		}
		back.TS = ev.TS
		if !reflect.DeepEqual(back, ev) {
			t.Fatalf("round trip of %q changed the event:\n%+v\n%+v", b, back, ev)
		}
	})
}
