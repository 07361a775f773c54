package keyed

import (
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/topics"
)

// holder is a test's Shared: the population model in a field.
type holder struct {
	m       *Model
	ps      *State
	changed int
}

func (h *holder) Population() (*State, error) {
	if h.ps == nil {
		ps, err := h.m.NewPopulation()
		if err != nil {
			return nil, err
		}
		h.ps = ps
	}
	return h.ps, nil
}

func (h *holder) PopulationChanged(*State) { h.changed++ }

// heldModel is a model of s counting into tot, whose population model a
// test holder keeps.
func heldModel(t testing.TB, s Settings, tot *Totals) (*Model, *holder) {
	t.Helper()
	h := &holder{}
	m, err := New(s, h, tot)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	return m, h
}

// A pending event keeps the experts' labels only under the mixture, whose
// key weighs them when the label comes: an additive model's (whose shared
// part also predicts) and a lone learner's pending events carry none, and
// the key state says so after a round trip through its codec.
func TestOnlyTheMixtureKeepsTheExpertsLabels(t *testing.T) {
	for _, population := range []string{PopulationOff, PopulationAdditive, PopulationMixture} {
		t.Run(population, func(t *testing.T) {
			s := testSettings(t, "perceptron", "")
			s.Population = population
			m, _ := heldModel(t, s, &Totals{})
			ks, err := m.NewState("k")
			if err != nil {
				t.Fatal(err)
			}
			for i, ev := range []topics.Event{{Kind: topics.Input, ID: "a", X: []float64{1, 0, 0, 0}, Label: 1}, {Kind: topics.Input, ID: "b", X: []float64{1, 1, 0, 0}}} {
				if st := m.Step(Input{Key: "k", Offset: int64(i), Event: &ev}, ks); st.Failed != nil || st.Refused != nil {
					t.Fatal(st.Failed, st.Refused)
				}
			}
			b, err := ks.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			back, err := m.Decode(&checkpoint.KeyRecord{Key: "k", State: b})
			if err != nil {
				t.Fatal(err)
			}
			pend := back.pending()
			if len(pend) != 1 {
				t.Fatalf("%d pending events, want 1", len(pend))
			}
			if kept := pend[0].population != 0; kept != (population == PopulationMixture) {
				t.Fatalf("the pending event keeps the experts' labels: %v (own %d, population %d)", kept, pend[0].own, pend[0].population)
			}
		})
	}
}
