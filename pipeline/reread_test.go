package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
)

// Awaited inputs are not written to the changelog: the marker says how far
// back a restore re-reads the events topic for them, the restore re-reads
// exactly that, and the labels that come after it teach as they would have
// without the restart. When retention deleted the start of that stretch,
// the labels of the events it held score their predictions and are counted
// as lost inputs, exactly those.
func TestAwaitedInputsAreReadAgainNotWritten(t *testing.T) {
	for _, tc := range []struct {
		name    string
		deleted int // events-topic records retention removed before the restore
	}{{"all retained", 0}, {"the first four deleted", 4}, {"every awaited one deleted", 10}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := testConfig(t, "perceptron", "")
			var recs []Record
			for i := range 20 { // e0..e9 await their labels; e10..e19 come labeled
				v := fmt.Sprintf(`{"id":"e%d","x":[%d,1,-1,0.5]}`, i, i%3-1)
				if i >= 10 {
					v = fmt.Sprintf(`{"id":"e%d","x":[%d,1,-1,0.5],"label":%d}`, i, i%3-1, 1-2*(i%2))
				}
				recs = append(recs, Record{Offset: int64(i), Key: []byte("k"), Value: []byte(v)})
			}
			var labels []Record
			for i := range 10 {
				labels = append(labels, Record{Offset: int64(20 + i), Key: []byte("k"), Value: fmt.Appendf(nil, `{"id":"e%d","label":%d}`, i, 1-2*(i%2))})
			}
			ref, _ := NewWorker(cfg, 0)
			run(t, ref, recs)
			store := checkpoint.NewMemoryStore()
			if _, _, err := ref.Checkpoint(ctx, store); err != nil {
				t.Fatal(err)
			}
			snap, err := store.Load(ctx, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			full := states(t, ref)["k"]
			if m := snap.Marker; m.Through[EventsTopic] != 19 || m.Reread != 20 || len(snap.Keys["k"].State) >= len(full) {
				t.Fatalf("marker %+v, key record of %d bytes (%d with its inputs): want the 20 records re-read and the inputs left out", *m, len(snap.Keys["k"].State), len(full))
			}

			w, _ := NewWorker(cfg, 0)
			res, err := w.Restore(ctx, store)
			if err != nil || res.From != [2]int64{0, 0} {
				t.Fatalf("restore: from %v, %v; want from [0 0]", res.From, err)
			}
			run(t, w, recs[tc.deleted:15]) // what retention kept: a source reopened now starts after it
			if next := w.Next(); next != [2]int64{15, 0} {
				t.Fatalf("half way through the re-read, the worker reads next from %v; want [15 0]", next)
			}
			run(t, w, recs[15:])
			if next := w.Next(); next != [2]int64{20, 0} {
				t.Fatalf("after the re-read, the worker reads next from %v; want [20 0]", next)
			}
			if got := w.Totals(); got.Skipped != int64(20-tc.deleted) || got.Events != 0 {
				t.Fatalf("the re-read skipped %d records and processed %d events; want %d and 0", got.Skipped, got.Events, 20-tc.deleted)
			}
			if c, err := w.TakeCheckpoint(); err != nil || c.Marker.Through[EventsTopic] != 19 || c.Marker.Reread != 20 {
				t.Fatalf("marker after the re-read %+v, %v: want Through 19, Reread 20", c.Marker, err)
			}
			run(t, w, labels)
			before := ref.Totals()
			run(t, ref, labels)
			got, want := w.Totals(), ref.Totals().Since(before)
			if got.LabelsJoined != 10 || got.Labeled != 10 || got.Mistakes != want.Mistakes || got.InputsLost != int64(tc.deleted) || want.InputsLost != 0 {
				t.Fatalf("%d labels joined, %d scored, %d mistakes, %d inputs lost; want 10, 10, %d, %d", got.LabelsJoined, got.Labeled, got.Mistakes, got.InputsLost, want.Mistakes, tc.deleted)
			}
			if tc.deleted == 0 {
				sameStates(t, w, ref)
			} else if states(t, w)["k"] == nil || string(states(t, w)["k"]) == string(states(t, ref)["k"]) {
				t.Fatal("the key learned labels whose inputs were lost")
			}
			if c, err := w.TakeCheckpoint(); err != nil || c.Marker.Reread != 0 {
				t.Fatalf("marker once no event awaits its label %+v, %v: want Reread 0", c.Marker, err)
			}
		})
	}
}

// With DRIFTSTREAM_AWAITED_INPUTS=changelog the key records hold the
// awaited inputs, the marker re-reads nothing, and a restore is whole
// without a replay.
func TestAwaitedInputsInTheChangelog(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, "perceptron", "")
	cfg.AwaitedInputs = keyed.AwaitedInChangelog
	ref, _ := NewWorker(cfg, 0)
	run(t, ref, records(3, 600, 8))
	store := checkpoint.NewMemoryStore()
	if _, _, err := ref.Checkpoint(ctx, store); err != nil {
		t.Fatal(err)
	}
	awaiting := 0
	for key := range ref.keys {
		in, _, _ := ref.Inspect(key)
		awaiting += in.AwaitingLabels
	}
	w, _ := NewWorker(cfg, 0)
	res, err := w.Restore(ctx, store)
	if err != nil || res.Marker.Reread != 0 || res.From != [2]int64{600, 0} || awaiting == 0 {
		t.Fatalf("restore from %v, marker %+v, %v, %d events awaiting: want from [600 0], nothing re-read", res.From, res.Marker, err, awaiting)
	}
	sameStates(t, w, ref)
}

// DRIFTSTREAM_AWAITED_INPUTS takes its two values, "" as the default, and
// refuses any other naming both.
func TestAwaitedInputsSetting(t *testing.T) {
	for _, tc := range []struct {
		value, want string
	}{{"", keyed.AwaitedFromEvents}, {"events", keyed.AwaitedFromEvents}, {"changelog", keyed.AwaitedInChangelog}, {"topic", ""}} {
		cfg := testConfig(t, "perceptron", "")
		cfg.AwaitedInputs = tc.value
		err := cfg.Validate()
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), `awaited inputs "topic": events (`) || !strings.Contains(err.Error(), "or changelog (") {
				t.Errorf("%q: %v, want refused naming both values", tc.value, err)
			}
			continue
		}
		if err != nil || cfg.WithDefaults().AwaitedInputs != tc.want {
			t.Errorf("%q: %v, %q; want %q", tc.value, err, cfg.WithDefaults().AwaitedInputs, tc.want)
		}
	}
}
