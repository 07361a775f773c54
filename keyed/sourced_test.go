package keyed

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/topics"
)

// The offset set answers as a plain set does, whatever the order of
// additions, removals and trims: its oldest is the set's minimum.
func TestOffsetSetMatchesASet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spread int64 // how far behind the newest an added offset may be
	}{{"in order", 0}, {"a little out of order", 40}, {"far out of order", 5000}} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tc.spread)))
			var s offsetSet
			var members []int64 // the set, in the order added
			next := int64(1000)
			for i := range 5000 {
				switch {
				case r.IntN(3) > 0 || len(members) == 0:
					o := max(next-r.Int64N(tc.spread+1), 0)
					next++
					s.add(o)
					if !slices.Contains(members, o) {
						members = append(members, o)
					}
				case r.IntN(10) == 0:
					s.remove(next + 7) // never added
				case r.IntN(20) == 0:
					t := next - r.Int64N(tc.spread+200)
					s.trimBelow(t)
					members = slices.DeleteFunc(members, func(o int64) bool { return o < t })
				default:
					j := r.IntN(len(members))
					s.remove(members[j])
					members = slices.Delete(members, j, j+1)
				}
				oldest := int64(-1)
				if len(members) > 0 {
					oldest = slices.Min(members)
				}
				if s.oldest() != oldest || s.len() != len(members) {
					t.Fatalf("step %d: oldest %d of %d, want %d of %d", i, s.oldest(), s.len(), oldest, len(members))
				}
			}
			s.clear()
			if s.oldest() != -1 || s.len() != 0 {
				t.Fatalf("cleared: oldest %d of %d", s.oldest(), s.len())
			}
		})
	}
}

// A key's changelog encoding leaves its sourced inputs out; revisiting the
// events they came from puts them back, so that the key equals the one
// encoded whole, and tracks their offsets again. A standardized key's
// inputs are not sourced: its changelog encoding is its whole one.
func TestRevisitTakesBackWhatTheChangelogLeftOut(t *testing.T) {
	for _, standardize := range []bool{false, true} {
		cfg := testSettings(t, "perceptron", "")
		cfg.Standardize = standardize
		m := testModel(t, cfg)
		ks, err := m.NewState("k")
		if err != nil {
			t.Fatal(err)
		}
		var events []topics.Event
		for i := range 12 {
			ev := topics.Event{Kind: topics.Input, ID: string(rune('a' + i)), X: []float64{float64(i), 1, -1, 0.5}}
			if i%3 == 0 {
				ev.Label = 1
			}
			events = append(events, ev)
			if st := m.Step(Input{Key: "k", Topic: EventsTopic, Offset: int64(i), Event: &ev}, ks); st.Refused != nil || st.Failed != nil {
				t.Fatal(st.Refused, st.Failed)
			}
		}
		awaiting, oldest := ks.Awaiting(), m.OldestSourced()
		whole, _ := ks.MarshalBinary()
		logged, _ := ks.MarshalChangelog()
		if standardize {
			if oldest != -1 || string(whole) != string(logged) {
				t.Fatalf("standardized: oldest sourced %d, changelog encoding %d bytes of %d: want none, the same", oldest, len(logged), len(whole))
			}
			continue
		}
		if awaiting != 8 || oldest != 1 || len(logged) >= len(whole) || !ks.HoldsSourced() {
			t.Fatalf("%d awaiting, oldest sourced %d, changelog encoding %d bytes of %d", awaiting, oldest, len(logged), len(whole))
		}
		m.ForgetSourced()
		back, err := m.Decode(&checkpoint.KeyRecord{Key: "k", State: logged})
		if err != nil {
			t.Fatal(err)
		}
		if back.HoldsSourced() {
			t.Fatal("decoded from the changelog, the key holds sourced inputs")
		}
		filled := 0
		for i := range events {
			if m.Revisit(Input{Key: "k", Topic: EventsTopic, Offset: int64(i), Event: &events[i]}, back) {
				filled++
			}
		}
		again, _ := back.MarshalBinary()
		if filled != 8 || string(again) != string(whole) || m.OldestSourced() != 1 || m.sourced.len() != 8 {
			t.Fatalf("revisited: %d filled, %d tracked from %d, equal %v; want 8 from 1, equal", filled, m.sourced.len(), m.OldestSourced(), string(again) == string(whole))
		}
		if m.Revisit(Input{Key: "k", Topic: EventsTopic, Offset: 1, Event: &events[1]}, back) {
			t.Fatal("a second revisit filled an input again")
		}
	}
}

// A dormant key's awaited input stops being tracked once it is more than
// PendingTTL records older than the newest: its label would find it
// expired, so a restore need not read back that far.
func TestTrackingForgetsInputsPastTheTTL(t *testing.T) {
	m := testModel(t, testSettings(t, "perceptron", "")) // PendingTTL 400, MaxPending 50
	states := map[string]*State{}
	step := func(key string, off int64) *State {
		ks, ok := states[key]
		if !ok {
			var err error
			if ks, err = m.NewState(key); err != nil {
				t.Fatal(err)
			}
			states[key] = ks
		}
		ev := topics.Event{Kind: topics.Input, ID: fmt.Sprint(off), X: []float64{1, 0, -1, 0.5}}
		if st := m.Step(Input{Key: key, Topic: EventsTopic, Offset: off, Event: &ev}, ks); st.Refused != nil || st.Failed != nil {
			t.Fatal(st.Refused, st.Failed)
		}
		return ks
	}
	old := step("dormant", 0)
	for off := int64(1); off <= 1000; off++ {
		step("busy", off)
	}
	// busy keeps its last 50 (MaxPending), 951 to 1000; dormant's, at 0,
	// is 1,000 records old: still in its state, no longer tracked.
	if got := m.OldestSourced(); got != 951 || old.Awaiting() != 1 || m.sourced.len() != 50 {
		t.Fatalf("oldest tracked %d of %d, dormant awaits %d: want 951 of 50, and 1", got, m.sourced.len(), old.Awaiting())
	}
}
