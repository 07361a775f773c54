package pipeline

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/driftstream/driftstream/keyed"
)

// A key's counters add up to the worker's, its last drift alert is the last
// one emitted for it, and all of it survives a checkpoint and restore
// unchanged.
func TestKeyInfoAddsUpAndSurvivesRestore(t *testing.T) {
	cfg := testConfig(t, "perceptron", "")
	cfg.Detectors = []keyed.DetectorSpec{{Detector: "adwin", Signal: keyed.SignalMistakes}}
	w, err := NewWorker(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	recs := records(5, 3000, 7)
	flip := flipping(1, 4000, 2000) // key "k": one alert
	for i := range flip {
		flip[i].Offset = int64(len(recs) + i)
	}
	all := append(recs, flip...)
	outs := run(t, w, all)
	var sum KeyInfo
	for key := range w.keys {
		in, ok, _ := w.Inspect(key)
		if !ok || in.Key != key || in.Learner != "perceptron" || in.StateBytes == 0 {
			t.Fatalf("Inspect(%q) = %+v, %v", key, in, ok)
		}
		sum.Events += in.Events
		sum.Labeled += in.Labeled
		sum.Mistakes += in.Mistakes
		sum.AwaitingLabels += in.AwaitingLabels
	}
	tot := w.Totals()
	if sum.Events != tot.Events || sum.Labeled != tot.Labeled || sum.Mistakes != tot.Mistakes || sum.Events != 3000-int64(tot.LabelsJoined)+4000 {
		t.Fatalf("keys sum to %d events, %d labeled, %d mistakes; worker: %d, %d, %d (%d labels joined)",
			sum.Events, sum.Labeled, sum.Mistakes, tot.Events, tot.Labeled, tot.Mistakes, tot.LabelsJoined)
	}
	alerts := alertsOf(outs)
	if len(alerts) == 0 {
		t.Fatal("no alert: the test needs one")
	}
	last := alerts[len(alerts)-1]
	k, _, _ := w.Inspect("k")
	if a := k.LastDriftAlert; a == nil || a.Offset != last.Offset || a.Detector != "adwin" || a.Signal != keyed.SignalMistakes || last.TS == nil || a.TS != *last.TS {
		t.Fatalf("last drift alert %+v, want offset %d at %v", a, last.Offset, last.TS)
	}
	if k.Accuracy == nil || *k.Accuracy != 1-float64(k.Mistakes)/float64(k.Labeled) {
		t.Fatalf("accuracy %v of %d mistakes in %d", k.Accuracy, k.Mistakes, k.Labeled)
	}
	if _, ok, _ := w.Inspect("never-seen"); ok {
		t.Fatal("Inspect of an unknown key found it")
	}

	r := restarted(t, w, all)
	for key := range w.keys {
		want, _, _ := w.Inspect(key)
		got, _, _ := r.Inspect(key)
		if want.InWarning { // a level the restore does not keep (Totals.KeysInWarning)
			got.InWarning = true
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("key %s after restore:\n%+v\nwant\n%+v", key, got, want)
		}
	}
}

// A reset through Runner.Do is written to the store before Do returns: a
// runner that restores afterwards — here after a stop that writes nothing
// more, as a crash would — holds the fresh learner, and goes on exactly like
// a worker that was reset at the same point of its input. A reset of a key
// the partition does not hold changes and writes nothing; Do after Run
// returned says the partition is not running.
func TestResetIsCheckpointedBeforeItAnswers(t *testing.T) {
	h := newHarness(t, 1200, 20, false)
	obs := &progress{}
	a := h.runner(1, newGate(400), nil, obs)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	// 400 records, a checkpoint every 40: the tenth ends the run up to the gate.
	eventually(t, "the first 400 records, checkpointed", func() bool { return obs.last.Load() == 399 && obs.checkpoints.Load() == 10 })

	var found bool
	var resetErr error
	writes := len(h.store.Log(0))
	if err := a.Do(ctx, func(w *Worker) bool { found, resetErr = w.Reset("never-seen"); return found }); err != nil || found || resetErr != nil {
		t.Fatalf("reset of an unknown key: %v, found %v, %v", err, found, resetErr)
	}
	if n := len(h.store.Log(0)); n != writes {
		t.Fatalf("a reset that changed nothing wrote %d records", n-writes)
	}
	if err := a.Do(ctx, func(w *Worker) bool { found, resetErr = w.Reset("k3"); return found }); err != nil || !found || resetErr != nil {
		t.Fatalf("reset k3: %v, found %v, %v", err, found, resetErr)
	}
	if n := len(h.store.Log(0)); n != writes+2 {
		t.Fatalf("the reset wrote %d records before it answered, want 2 (the key and the marker)", n-writes)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(h.store.Log(0)); n != writes+2 {
		t.Fatalf("the stop wrote %d more records; this test needs it to write none (a crash)", n-writes-2)
	}
	if err := a.Do(context.Background(), func(*Worker) bool { return false }); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Do after Run returned: %v, want ErrNotRunning", err)
	}

	// The restored key is a fresh learner that was reset once.
	b, _ := NewWorker(h.cfg, 0)
	if _, err := b.Restore(context.Background(), h.store); err != nil {
		t.Fatal(err)
	}
	fresh, _ := b.model.NewState("k3") // as a reset makes it
	want, _ := fresh.Learner().MarshalBinary()
	got, _ := b.keys["k3"].Learner().MarshalBinary()
	if in, _, _ := b.Inspect("k3"); !bytes.Equal(got, want) || in.Resets != 1 {
		t.Fatalf("restored k3: fresh learner %v, %d resets", bytes.Equal(got, want), in.Resets)
	}

	// Finishing from the store equals one worker reset at the same point.
	h.kept = nil
	final := h.finish(2)
	ref, _ := NewWorker(h.cfg, 0)
	for i, rec := range h.feed.recs {
		if i == 400 {
			ref.Reset("k3")
		}
		ref.Process(context.Background(), rec)
	}
	exp, got2 := states(t, ref), states(t, final.w)
	if len(exp) != len(got2) {
		t.Fatalf("%d keys, want %d", len(got2), len(exp))
	}
	differing := 0
	for k, s := range exp {
		if !bytes.Equal(got2[k], s) {
			differing++
		}
	}
	if differing != 0 {
		t.Fatalf("%d of %d keys differ from a worker reset at the same point", differing, len(exp))
	}
}
