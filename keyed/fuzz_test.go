package keyed

import (
	"bytes"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
)

// FuzzDecode feeds damaged and arbitrary key states to Decode, seeded with
// the golden keys of every version: it never panics, and a state it
// accepts writes back (in the current version) to bytes that decode and
// write back to themselves, awaited events and all.
func FuzzDecode(f *testing.F) {
	for _, file := range []string{"testdata/keystate-v1.golden", "testdata/keystate-v4.golden", "testdata/keystate-v8.golden", "testdata/keystate-v10.golden"} {
		n := 0
		for key, state := range goldenFile(f, file) {
			if n++; n <= 4 {
				f.Add(key, state)
			}
		}
	}
	f.Fuzz(func(t *testing.T, key string, state []byte) {
		m := testModel(t, goldenConfig(t))
		ks, err := m.Decode(&checkpoint.KeyRecord{Key: key, State: state})
		if err != nil {
			return
		}
		for _, omit := range []bool{false, true} {
			once, err := ks.appendState(nil, omit, nil, 0)
			if err != nil {
				t.Fatalf("a decoded state does not encode: %v", err)
			}
			back, err := m.Decode(&checkpoint.KeyRecord{Key: key, State: once})
			if err != nil {
				t.Fatalf("omit %v: the state written back does not decode: %v", omit, err)
			}
			twice, err := back.appendState(nil, omit, nil, 0)
			if err != nil || !bytes.Equal(once, twice) {
				t.Fatalf("omit %v: written back twice otherwise (%v)", omit, err)
			}
		}
	})
}
