package pipeline

import (
	"bytes"
	"context"
	"testing"

	"github.com/driftstream/driftstream/keyed"
)

// A checkpoint's key records, which share one buffer, are each key's
// changelog record (keyed.State.MarshalChangelog) byte for byte, in the
// second checkpoint too (its buffer sized by the first's), with the
// additive population model's shared part among them.
func TestCheckpointRecordsAreTheKeysStates(t *testing.T) {
	cfg := testConfig(t, "logreg", "")
	cfg.Population = keyed.PopulationAdditive
	w, err := NewWorker(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	recs := records(3, 2000, 40)
	for round, part := range [][]Record{recs[:1000], recs[1000:]} {
		for _, r := range part {
			if err := w.Process(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		c, err := w.TakeCheckpoint()
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Keys) < 40 {
			t.Fatalf("round %d: %d key records", round, len(c.Keys))
		}
		total := 0
		for _, rec := range c.Keys {
			want, err := w.keys[rec.Key].MarshalChangelog()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rec.State, want) || cap(rec.State) != len(rec.State) {
				t.Fatalf("round %d key %q: record %x (cap %d), state %x", round, rec.Key, rec.State, cap(rec.State), want)
			}
			total += len(want)
		}
		if c.Bytes != total {
			t.Fatalf("round %d: the batch counts %d bytes, its records hold %d", round, c.Bytes, total)
		}
	}
}
