package keyed

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/driftstream/driftstream/topics"
)

// BenchmarkNewState is the cost of a key seen for the first time, with the
// shipped learner (logreg of two step sizes, the intercept) and detector
// (ADWIN on mistakes): at a million keys, with an event or a few a key,
// the service makes one per event.
//
//	go test -run '^$' -bench NewState -benchmem ./keyed
func BenchmarkNewState(b *testing.B) {
	vec, _ := topics.NewVectorizer(10, 0)
	m, err := New(Settings{Learner: "logreg", Seed: 1, Vector: vec.WithBias(), QueryScale: 1,
		Detectors: []DetectorSpec{{Detector: "adwin", Signal: SignalMistakes, Params: json.RawMessage(`{"delta":0.00002}`)}}}, nil, &Totals{})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := m.NewState(keys[i%len(keys)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
