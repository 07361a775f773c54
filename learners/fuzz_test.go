package learners

import (
	"encoding/json"
	"testing"
)

// FuzzRestore feeds corrupted snapshots to RestoreWithin: it never panics
// nor allocates past its limit, and a snapshot it accepts marshals back to
// one that restores to the same bytes.
func FuzzRestore(f *testing.F) {
	for _, name := range Names() {
		vals := []float64{1, 0, 1, 1} // Boolean, as the Winnows need
		var params json.RawMessage
		if name == "weighted-majority" {
			params = json.RawMessage(`{"members":[{"name":"tracking-winnow"},{"name":"perceptron"}]}`)
		}
		l, err := New(name, params, Config{Dim: len(vals), Seed: 1, Key: "k"})
		if err != nil { // a 1-D learner
			vals = vals[:1]
			if l, err = New(name, params, Config{Dim: 1, Seed: 1, Key: "k"}); err != nil {
				f.Fatal(err)
			}
		}
		x, _ := NewDense(vals)
		for i := 0; i < 3; i++ {
			p, err := l.Predict(x)
			if err != nil {
				f.Fatal(err)
			}
			p = l.Decide(p)
			if err := l.Learn(x, 1-2*(i%2), p); err != nil {
				f.Fatal(err)
			}
		}
		b, err := l.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, snapshot []byte) {
		l, err := RestoreWithin(snapshot, 1<<22)
		if err != nil {
			return
		}
		b, err := l.MarshalBinary()
		if err != nil {
			t.Fatalf("restored %s does not marshal: %v", l.Name(), err)
		}
		l2, err := RestoreWithin(b, 1<<22)
		if err != nil {
			t.Fatalf("%s: its own snapshot does not restore: %v", l.Name(), err)
		}
		b2, _ := l2.MarshalBinary()
		if string(b) != string(b2) {
			t.Fatalf("%s: snapshot changed over a restore", l.Name())
		}
		// A restored state, however odd, predicts or says why not.
		ones := make([]float64, l.Dim())
		for i := range ones {
			ones[i] = 1
		}
		x, _ := NewDense(ones)
		if p, err := l.Predict(x); err == nil {
			l.Decide(p)
		}
	})
}
