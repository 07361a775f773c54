package contract

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
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
