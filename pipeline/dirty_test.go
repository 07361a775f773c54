package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
)

// A record encoded when its key changed is the record the checkpoint would
// have encoded: workers that encode every key early, none, or by the
// partition's mix (the default) write the same checkpoints byte for byte,
// through keys that change once an interval and keys that change often,
// late labels, resets, a refused write and a key store that evicts keys.
// It fails if a change of a key that was already dirty kept its early
// record.
func TestEarlyRecordsAreTheCheckpointsRecords(t *testing.T) {
	shipped := func(*testing.T) Config { return shippedConfig(10) }
	for _, c := range []struct {
		name  string
		cfg   func(t *testing.T) Config
		recs  []Record
		cache int // keys in memory with a key store; 0: none
	}{
		{"shipped/many-keys", shipped, shippedRecords(10, 3000, 6000, false), 0},
		{"shipped/few-keys-late", shipped, shippedRecords(10, 20, 6000, true), 0},
		{"shipped/key-store", shipped, shippedRecords(10, 500, 6000, true), 50},
		{"perceptron", func(t *testing.T) Config { return testConfig(t, "perceptron", "") }, records(3, 6000, 800), 0},
		{"mixture-lasec", func(t *testing.T) Config {
			cfg := testConfig(t, "lasec-ss", `{"a":0.3}`)
			cfg.Population = keyed.PopulationMixture
			return cfg
		}, records(4, 6000, 800), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var runs [3][][]checkpoint.KeyRecord
			var early [3]int
			for m, force := range []*bool{new(true), new(false), nil} {
				w, err := NewWorker(c.cfg(t), 0)
				if err != nil {
					t.Fatal(err)
				}
				if c.cache > 0 {
					if err := w.UseKeyStore(newTestKeys(t), c.cache); err != nil {
						t.Fatal(err)
					}
				}
				w.early.force = force
				if force != nil {
					w.early.on = *force
				}
				store := &refusingStore{MemoryStore: checkpoint.NewMemoryStore()}
				for i, r := range c.recs {
					if err := w.Process(context.Background(), r); err != nil {
						t.Fatal(err)
					}
					if i%700 == 350 { // a reset: a change outside Process
						if _, err := w.Reset(string(r.Key)); err != nil {
							t.Fatal(err)
						}
					}
					if w.early.on {
						early[m]++
					}
					if (i+1)%500 != 0 {
						continue
					}
					dirtyStatesHeld(t, w)
					w.TakeOutputs()
					if (i+1)%1500 == 0 { // refused: every key stays dirty, early records dropped
						store.refuse = true
						if _, _, err := w.Checkpoint(context.Background(), store); err == nil {
							t.Fatal("refused write: no error")
						}
						store.refuse = false
						dirtyStatesHeld(t, w)
					}
					b, err := w.TakeCheckpoint()
					if err != nil {
						t.Fatal(err)
					}
					runs[m] = append(runs[m], b.Keys)
				}
			}
			if early[0] != len(c.recs) || early[1] != 0 {
				t.Fatalf("forced early for %d and %d records of %d", early[0], early[1], len(c.recs))
			}
			t.Logf("the default encoded early for %d of %d records", early[2], len(c.recs))
			if c.name == "shipped/many-keys" && early[2] < len(c.recs)/2 {
				t.Errorf("the default encoded early for %d of %d records of keys that change about once an interval", early[2], len(c.recs))
			}
			for m := 1; m < 3; m++ {
				if len(runs[m]) != len(runs[0]) {
					t.Fatalf("run %d: %d checkpoints, want %d", m, len(runs[m]), len(runs[0]))
				}
				for k := range runs[0] {
					if err := sameRecords(runs[m][k], runs[0][k]); err != nil {
						t.Fatalf("checkpoint %d of run %d against all early: %v", k, m, err)
					}
				}
			}
		})
	}
}

// sameRecords says how got differs from want, key records in order.
func sameRecords(got, want []checkpoint.KeyRecord) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d key records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Key != w.Key || g.Partition != w.Partition || g.Epoch != w.Epoch || g.AppliedThrough != w.AppliedThrough || !bytes.Equal(g.State, w.State) {
			return fmt.Errorf("record %d: key %q applied %v, %d bytes; want key %q applied %v, %d bytes", i, g.Key, g.AppliedThrough, len(g.State), w.Key, w.AppliedThrough, len(w.State))
		}
	}
	return nil
}

// A key listed while not held (its record was unreadable) is written as an
// empty record, which supersedes that record; listed again once replay
// rebuilt it, it is written once, with its state.
func TestDirtyKeyNotHeld(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprintf("early-%v", early), func(t *testing.T) {
			w, err := NewWorker(testConfig(t, "perceptron", ""), 0)
			if err != nil {
				t.Fatal(err)
			}
			w.early.force, w.early.on = &early, early
			w.markDirty("gone", nil)
			w.markDirty("back", nil)
			w.markDirty("b", nil)
			w.markDirty("c", nil)
			run(t, w, []Record{
				{Offset: 0, Key: []byte("back"), Value: []byte(`{"id":"e0","x":[1,0,0,1],"label":1}`)},
				{Offset: 1, Key: []byte("a"), Value: []byte(`{"id":"e1","x":[1,0,0,1],"label":1}`)},
				{Offset: 2, Key: []byte("back"), Value: []byte(`{"id":"e2","x":[0,1,0,1],"label":-1}`)},
				{Offset: 3, Key: []byte("c"), Value: []byte(`{"id":"e3","x":[0,1,0,1],"label":-1}`)},
			})
			c, err := w.TakeCheckpoint()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, rec := range c.Keys {
				got = append(got, fmt.Sprintf("%s:%v", rec.Key, len(rec.State) > 0))
				if len(rec.State) > 0 {
					held, err := w.model.AppendChangelog(nil, w.keys[rec.Key])
					if err != nil || !bytes.Equal(rec.State, held) || rec.AppliedThrough != w.keys[rec.Key].Applied {
						t.Fatalf("key %q: record not its state (%v)", rec.Key, err)
					}
				}
			}
			if want := "[a:true b:false back:true c:true gone:false]"; fmt.Sprint(got) != want {
				t.Fatalf("records %v, want %s", got, want)
			}
			if len(w.dirty) != 0 || w.keys["back"].Mark.Dirty || w.keys["a"].Mark.Dirty || w.keys["c"].Mark.Dirty {
				t.Fatalf("after the checkpoint: %d listed, back dirty %v", len(w.dirty), w.keys["back"].Mark.Dirty)
			}
		})
	}
}

// Keys are encoded early while at least half of those a checkpoint wrote
// changed once; a forced choice stands.
func TestEarlyRecordsDecide(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		was           bool
		once, written int
		force         *bool
		want          bool
	}{
		{false, 0, 0, nil, false}, // nothing written: nothing to go by
		{true, 0, 0, nil, true},
		{false, 5, 10, nil, true},
		{true, 4, 10, nil, false},
		{false, 10, 10, nil, true},
		{false, 0, 10, &yes, true},
		{true, 10, 10, &no, false},
	} {
		e := earlyRecords{on: c.was, force: c.force}
		if e.decide(c.once, c.written); e.on != c.want {
			t.Errorf("on %v, decide(%d, %d), force %v: on %v, want %v", c.was, c.once, c.written, c.force != nil, e.on, c.want)
		}
	}
	w, err := NewWorker(testConfig(t, "perceptron", ""), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !w.early.on {
		t.Error("a new worker does not encode early: its first keys are all new")
	}
}

// A checkpoint that fails (here the key store's write as it evicts) keeps
// its keys' early records: the retried checkpoint takes them, and writes
// what a worker that encodes nothing early writes.
func TestFailedCheckpointKeepsEarlyRecords(t *testing.T) {
	cfg := testConfig(t, "lasec-ss", `{"a":0.3}`)
	recs := labeledEvents(300, func(i int) string { return fmt.Sprint("k", i) }) // each key changes once
	ref, err := NewWorker(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	never := false
	ref.early.force, ref.early.on = &never, false
	w, keys := cachedWorker(t, cfg, 1)
	run(t, ref, recs)
	run(t, w, recs)
	early := func() (n int) {
		for _, d := range w.dirty {
			if d.early != nil {
				n++
			}
		}
		return n
	}
	if n := early(); n != len(recs) {
		t.Fatalf("%d of %d keys encoded early", n, len(recs))
	}
	keys.arm("set", 1)
	if _, err := w.TakeCheckpoint(); !errors.Is(err, errInjected) {
		t.Fatalf("TakeCheckpoint = %v, want the injected failure", err)
	}
	if n := early(); n != len(recs) {
		t.Fatalf("after the failed checkpoint %d of %d keys keep their early record", n, len(recs))
	}
	got, err := w.TakeCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.TakeCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	sameBatch(t, got, want)
}
