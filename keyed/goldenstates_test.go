package keyed

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/driftstream/driftstream/topics"
)

// changelogSuffix names a golden key's changelog encoding.
const changelogSuffix = "#changelog"

// goldenStates runs a scripted stream of five keys through a model of
// goldenConfig and returns each key's state, encoded: concepts that flip
// halfway on even keys, label noise that rises from 5% to 45% halfway on
// odd ones (so that detectors alert and learners reset), every third event
// unlabeled with its label five events later as a label record, the last
// ones still awaiting their labels, times on some events. Each key comes
// twice: its key-store encoding, then its changelog one (changelogSuffix).
func goldenStates(t *testing.T, m *Model) [][2]string {
	t.Helper()
	r := rand.New(rand.NewPCG(11, 12))
	var out [][2]string
	for k := range 5 {
		key := fmt.Sprintf("k%d", k)
		ks, err := m.NewState(key)
		if err != nil {
			t.Fatal(err)
		}
		w := make([]float64, dim)
		for j := range w {
			w[j] = r.NormFloat64()
		}
		type later struct {
			id    string
			label int
			at    int
		}
		var labels []later
		off := int64(0)
		step := func(ev topics.Event) {
			st := m.Step(Input{Key: key, Topic: EventsTopic, Offset: off, Event: &ev}, ks)
			if st.Refused != nil {
				t.Fatalf("key %s offset %d: %v", key, off, st.Refused)
			}
			ks.Applied[EventsTopic] = off
			off++
		}
		const n = 600
		for i := range n {
			x := make([]float64, dim)
			s := 0.0
			for j := range x {
				x[j] = r.NormFloat64()
				s += w[j] * x[j]
			}
			y, noise := 1, 0.05
			if (s < 0) != (i >= n/2 && k%2 == 0) {
				y = -1
			}
			if i >= n/2 && k%2 == 1 {
				noise = 0.45
			}
			if r.Float64() < noise {
				y = -y
			}
			ev := topics.Event{Kind: topics.Input, ID: fmt.Sprintf("e%d", i), X: x, Label: y}
			if i%4 == 0 {
				ev.TS = time.Unix(1_700_000_000+int64(i), 0).UTC()
			}
			if i%3 == 0 {
				ev.Label = 0
				labels = append(labels, later{ev.ID, y, i + 5})
			}
			step(ev)
			for len(labels) > 0 && labels[0].at <= i && i < n-20 {
				step(topics.Event{Kind: topics.LabelRecord, ID: labels[0].id, Label: labels[0].label})
				labels = labels[1:]
			}
		}
		b, err := ks.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		c, err := ks.MarshalChangelog()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, [2]string{key, fmt.Sprintf("%x", b)}, [2]string{key + changelogSuffix, fmt.Sprintf("%x", c)})
	}
	return out
}
