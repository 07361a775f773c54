package streams

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"testing"
)

// The population generator: Zipf key frequencies, ids numbered per key,
// the shared concept's re-draws as drift points, every key on the shared
// concept when dev = 0, and the same stream from the same seed.
func TestPopulationGenerator(t *testing.T) {
	src, err := OpenSynth("synth:population?T=20000&keys=500&zipf=1.2&shared_period=5000&noise=0&dev=0&depart=0&d=5", 3)
	if err != nil {
		t.Fatal(err)
	}
	g := src.(*populationSource)
	if !slices.Equal(g.DriftPoints(), []int{5000, 10000, 15000}) {
		t.Fatalf("drift points %v", g.DriftPoints())
	}
	counts := map[string]int{}
	for i := 0; ; i++ {
		w0 := append([]float64(nil), g.w0...) // the shared concept this example is drawn under
		if i > 0 && i%5000 == 0 {
			w0 = nil
		}
		ex, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ex.ID != strconv.Itoa(counts[ex.Key]) {
			t.Fatalf("example %d: id %s, want the key's event number %d", i, ex.ID, counts[ex.Key])
		}
		counts[ex.Key]++
		if w0 != nil { // dev = 0, no departures, no noise: every key's label is the shared concept's
			m := 0.0
			for j, x := range ex.X.Dense() {
				m += w0[j] * x
			}
			if sgn(m) != ex.Label {
				t.Fatalf("example %d of %s: label %d, the shared concept says %d", i, ex.Key, ex.Label, sgn(m))
			}
		}
	}
	if !(counts["key-0"] > counts["key-9"] && counts["key-9"] > counts["key-99"] && counts["key-0"] > 20000/10) {
		t.Fatalf("not Zipf: key-0 %d, key-9 %d, key-99 %d events", counts["key-0"], counts["key-9"], counts["key-99"])
	}
	a, _ := OpenSynth("synth:population?T=3000&keys=50", 9)
	b, _ := OpenSynth("synth:population?T=3000&keys=50", 9)
	ea, eb := drain(t, a), drain(t, b)
	for i := range ea {
		if ea[i].Key != eb[i].Key || ea[i].Label != eb[i].Label || !slices.Equal(ea[i].X.Dense(), eb[i].X.Dense()) {
			t.Fatalf("example %d differs between two runs of one seed", i)
		}
	}
	for _, bad := range []string{"synth:population?zipf=1", "synth:population?depart=2", "synth:population?keys=0"} {
		if _, err := OpenSynth(bad, 1); !errors.Is(err, ErrParam) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
