package drift

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// A Maker's detectors are New's, verdict for verdict and byte for byte, and
// share nothing with each other: feeding one leaves the next made fresh.
func TestMakerMakesWhatNewMakes(t *testing.T) {
	xs := bernoulli(5, 4000, func(i int) float64 {
		if i < 2000 {
			return 0.1
		}
		return 0.5
	})
	params := map[string]json.RawMessage{"adwin": json.RawMessage(`{"delta":0.01}`), "page-hinkley": json.RawMessage(`{"threshold":20}`)}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			m, err := NewMaker(name, params[name])
			if err != nil {
				t.Fatal(err)
			}
			want, _ := New(name, params[name])
			got := m.New()
			for i, x := range xs {
				if sw, sg := want.Add(x), got.Add(x); sw != sg {
					t.Fatalf("value %d: made %v, New's %v", i, sg, sw)
				}
			}
			ew, _ := want.MarshalBinary()
			eg, _ := got.MarshalBinary()
			if !bytes.Equal(ew, eg) {
				t.Fatal("snapshots differ after the same values")
			}
			fresh, _ := New(name, params[name])
			ef, _ := fresh.MarshalBinary()
			if en, _ := m.New().MarshalBinary(); !bytes.Equal(en, ef) {
				t.Fatal("the detector made after a fed one is not fresh")
			}
			if bytes.Equal(eg, ef) {
				t.Fatal("the stream left the detector as it started: the test cannot tell copies apart")
			}
		})
	}
	if _, err := NewMaker("adwin", json.RawMessage(`{"delta":2}`)); !errors.Is(err, ErrParam) {
		t.Fatalf("bad parameters: %v", err)
	}
	if _, err := NewMaker("cusum", nil); !errors.Is(err, ErrParam) {
		t.Fatalf("unknown detector: %v", err)
	}
}
