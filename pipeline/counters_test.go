package pipeline

import (
	"context"
	"testing"

	"github.com/driftstream/driftstream/internal/window"
)

// outcomes follows a Runner's scored outcomes through its RecordHook.
type outcomes struct {
	progress
	window  *window.Accuracy
	effects Totals // the effects summed
}

func (o *outcomes) Record(f *Fetched, e Effect) {
	o.progress.Record(f, e)
	o.effects.Events += e.Events
	o.effects.Labeled += e.Labeled
	o.effects.Mistakes += e.Mistakes
	o.effects.Queries += e.Queries
	o.effects.Alerts += e.Alerts
	if e.Labeled > 0 {
		o.window.Add(e.Outcome.Wrong)
	}
}

// A Runner's snapshot counts the records it processed itself — a resumed
// worker's earlier counts are not in it — with the windowed accuracy of the
// partition's last WindowSize labeled events, and the effects its
// RecordHooks hear of add up to it.
func TestSnapshotCountsTheRunnersOwnRecords(t *testing.T) {
	h := newHarness(t, 2600, 9, false)
	a := h.runUntil(1, 1200)
	first := a.Snapshot()
	if first.Totals != a.w.Totals() || first.Phase != PhaseStopped || first.Restore.Origin.Resumed() || first.Totals.Events == 0 {
		t.Fatalf("the first runner's snapshot %+v, its worker's counters %+v", first.Totals, a.w.Totals())
	}
	h.kept, h.feed.bounded = a.Kept(), true
	obs := &outcomes{window: window.New(WindowSize)}
	c := h.runner(2, newGate(1<<62), nil, obs)
	if s := c.Snapshot(); s.Phase != PhaseIdle || s.Totals != (Totals{}) {
		t.Fatalf("a snapshot before Run: %+v", c.Snapshot())
	}
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	snap, all := c.Snapshot(), c.w.Totals()
	if !snap.Restore.Origin.Resumed() {
		t.Fatal("the second runner did not resume the kept state")
	}
	own := all.Since(first.Totals)
	if snap.Totals != own || snap.Totals.Events+first.Totals.Events != all.Events {
		t.Fatalf("the second runner's snapshot counts %d events (%+v); its worker %d, the first runner %d", snap.Totals.Events, snap.Totals, all.Events, first.Totals.Events)
	}
	e := obs.effects
	if e.Events != own.Events || e.Labeled != own.Labeled || e.Mistakes != own.Mistakes || e.Queries != own.Queries || e.Alerts != own.Alerts {
		t.Fatalf("the effects add up to %+v, the snapshot says %+v", e, own)
	}
	if own.Labeled < WindowSize || snap.WindowLabeled != WindowSize || snap.WindowAccuracy != obs.window.Value() {
		t.Fatalf("window: %d labeled at accuracy %v; the outcomes give %d at %v (of %d labeled)", snap.WindowLabeled, snap.WindowAccuracy, obs.window.Len(), obs.window.Value(), own.Labeled)
	}
	if snap.Keys.Keys != c.w.Keys() || snap.Lag != 0 {
		t.Fatalf("keys %+v (worker %d), lag %d", snap.Keys, c.w.Keys(), snap.Lag)
	}
}
