package topics

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every event and label record AppendJSON writes decodes back to itself,
// and a dense event's encoding is encoding/json's of the same fields as a
// map, byte for byte.
func TestEventRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ids := []string{"e-1", "quote\"back\\slash", "é😀", "k<&>", "\u2028"}
	floats := []float64{0, 1, -1, 0.1, 1e-7, 123456789.125, 1e21, -3.5e-300, math.MaxFloat64, math.SmallestNonzeroFloat64}
	pick := func() float64 {
		if r.IntN(2) == 0 {
			return floats[r.IntN(len(floats))]
		}
		return (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(40)-20))
	}
	for i := 0; i < 5000; i++ {
		ev := Event{ID: ids[r.IntN(len(ids))], Label: r.IntN(3) - 1}
		switch r.IntN(3) {
		case 0:
			ev.Kind = LabelRecord
			if ev.Label == 0 {
				ev.Label = 1
			}
		case 1:
			ev.X = make([]float64, 1+r.IntN(6))
			for j := range ev.X {
				ev.X[j] = pick()
			}
		default:
			ev.Features = map[string]float64{}
			for j := 0; j < 1+r.IntN(4); j++ {
				ev.Features[ids[r.IntN(len(ids))]+string(rune('a'+j))] = pick()
			}
		}
		if ev.Kind == Input && r.IntN(2) == 0 {
			ev.TS = time.Unix(r.Int64N(4e9), r.Int64N(1e9)).UTC()
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("%+v: %v", ev, err)
		}
		b := ev.AppendJSON(nil)
		got, err := Decode(b, 0)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !got.TS.Equal(ev.TS) {
			t.Fatalf("%s: ts %v, want %v", b, got.TS, ev.TS)
		}
		got.TS = ev.TS
		if !reflect.DeepEqual(got, ev) {
			t.Fatalf("%s decodes to %+v, want %+v", b, got, ev)
		}
		if ev.X != nil {
			m := map[string]any{"id": ev.ID, "x": ev.X}
			if ev.Label != 0 {
				m["label"] = ev.Label
			}
			if !ev.TS.IsZero() {
				m["ts"] = ev.TS.Format(time.RFC3339Nano)
			}
			if want, _ := json.Marshal(m); !bytes.Equal(b, want) {
				t.Fatalf("\n got %s\nwant %s", b, want)
			}
		}
	}
}

// Validate refuses in memory what Decode refuses on the wire: each event
// here is invalid, and its encoding does not decode.
func TestValidateRefusesWhatDecodeRefuses(t *testing.T) {
	long := strings.Repeat("i", MaxIDBytes+1)
	for _, tc := range []struct {
		name string
		ev   Event
	}{
		{"no id", Event{X: []float64{1}}},
		{"long id", Event{ID: long, X: []float64{1}}},
		{"label 2", Event{ID: "a", X: []float64{1}, Label: 2}},
		{"no input", Event{ID: "a"}},
		{"empty x", Event{ID: "a", X: []float64{}}},
		{"empty features", Event{ID: "a", Features: map[string]float64{}}},
		{"both", Event{ID: "a", X: []float64{1}, Features: map[string]float64{"f": 1}}},
		{"NaN", Event{ID: "a", X: []float64{1, math.NaN()}}},
		{"Inf feature", Event{ID: "a", Features: map[string]float64{"f": math.Inf(-1)}}},
		{"label record without label", Event{Kind: LabelRecord, ID: "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.ev.Validate(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate: %v, want ErrInvalid", err)
			}
			if b := tc.ev.AppendJSON(nil); tc.name != "both" { // the encoding writes the features alone
				if _, err := Decode(b, 0); err == nil {
					t.Fatalf("%s decodes, but Validate refuses it", b)
				}
			}
		})
	}
}
