package keyed_test

import (
	"fmt"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/topics"
)

// One key stepped through an event with its label, an unlabeled event and
// that event's label, which comes later: the Step of each says what to
// write and what it scored. A Model without a population model needs no
// holder (Shared).
func ExampleModel_Step() {
	vec, _ := topics.NewVectorizer(2, 0)
	var totals keyed.Totals
	m, err := keyed.New(keyed.Settings{Learner: "perceptron", Vector: vec, QueryScale: 1}, nil, &totals)
	if err != nil {
		fmt.Println(err)
		return
	}
	ks, _ := m.NewState("customer-1")
	for i, ev := range []topics.Event{
		{Kind: topics.Input, ID: "a", X: []float64{1, 0}, Label: -1},
		{Kind: topics.Input, ID: "b", X: []float64{1, 0}},
		{Kind: topics.LabelRecord, ID: "b", Label: -1},
	} {
		st := m.Step(keyed.Input{Key: "customer-1", Offset: int64(i), Event: &ev}, ks)
		ks.Applied[keyed.EventsTopic] = int64(i) // the holder's: absorbed
		fmt.Printf("%s: predicted %v (label %d), label request %v, scored %v\n", ev.ID, st.Predicted, st.Prediction.Label, st.Queried, st.Scored)
	}
	fmt.Printf("labeled %d, mistakes %d, awaiting %d\n", totals.Labeled, totals.Mistakes, ks.Awaiting())
	// Output:
	// a: predicted true (label 1), label request false, scored true
	// b: predicted true (label -1), label request false, scored false
	// b: predicted false (label 0), label request false, scored true
	// labeled 2, mistakes 1, awaiting 0
}

// A key's state is checkpointed as one record in the key-state format
// (codec.go) and decoded back by a model of the same settings, bit for bit.
func ExampleModel_Decode() {
	vec, _ := topics.NewVectorizer(2, 0)
	m, _ := keyed.New(keyed.Settings{Learner: "logreg", Vector: vec}, nil, new(keyed.Totals))
	ks, _ := m.NewState("device-7")
	m.Step(keyed.Input{Key: "device-7", Event: &topics.Event{Kind: topics.Input, ID: "e1", X: []float64{0.5, -1}, Label: 1}}, ks)
	ks.Applied[keyed.EventsTopic] = 0

	state, _ := ks.MarshalBinary()
	back, err := m.Decode(&checkpoint.KeyRecord{Key: "device-7", State: state, AppliedThrough: ks.Applied})
	if err != nil {
		fmt.Println(err)
		return
	}
	again, _ := back.MarshalBinary()
	fmt.Printf("format version %d, %d bytes, decoded back equal: %v\n", state[1], len(state), string(again) == string(state))
	// Output:
	// format version 10, 112 bytes, decoded back equal: true
}
