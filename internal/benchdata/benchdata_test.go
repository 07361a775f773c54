package benchdata

import (
	"encoding/json"
	"testing"
)

// The late mix: about half the events labeled inline, a quarter labeled
// by a record 30 to 80 events after theirs (or after the last event), a
// quarter never; without it,
// every event labeled. The same arguments give the same records.
func TestStream(t *testing.T) {
	for _, late := range []bool{false, true} {
		type rec struct{ key, value string }
		var first, again []rec
		Stream(8000, 3, 10, late, func(k, v []byte) { first = append(first, rec{string(k), string(v)}) })
		Stream(8000, 3, 10, late, func(k, v []byte) { again = append(again, rec{string(k), string(v)}) })
		if len(first) != len(again) {
			t.Fatalf("late %v: %d records, then %d", late, len(first), len(again))
		}
		seen := map[string]int{} // event id: its position among events
		inline, unlabeled, labels, events := 0, 0, 0, 0
		for i, r := range first {
			if r != again[i] {
				t.Fatalf("late %v: record %d differs between runs", late, i)
			}
			var ev struct {
				ID    string    `json:"id"`
				X     []float64 `json:"x"`
				Label int       `json:"label"`
			}
			if err := json.Unmarshal([]byte(r.value), &ev); err != nil {
				t.Fatal(err)
			}
			switch {
			case ev.X == nil: // a label record, 30 to 80 events after its event
				labels++
				// (the last event flushes those not yet due)
				if at, ok := seen[ev.ID]; !ok || events < 8000 && (events-1-at < 30 || events-1-at > 80) {
					t.Fatalf("late %v: label of %s after %d events", late, ev.ID, events-1-at)
				}
			case ev.Label != 0:
				inline++
			default:
				unlabeled++
			}
			if ev.X != nil {
				seen[ev.ID] = events
				events++
			}
		}
		if events != 8000 {
			t.Fatalf("late %v: %d events", late, events)
		}
		if !late && (inline != 8000 || labels != 0) || late && (inline < 3800 || inline > 4200 || unlabeled < 3800 || unlabeled > 4200 || labels < unlabeled/2-200 || labels > unlabeled/2+200) {
			t.Fatalf("late %v: %d inline, %d unlabeled, %d label records", late, inline, unlabeled, labels)
		}
	}
}
