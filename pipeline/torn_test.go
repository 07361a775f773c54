package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
)

// restoredHook keeps what the Runner's restore found.
type restoredHook struct{ res Restored }

func (h *restoredHook) Restored(res Restored, _ KeyCount, _ time.Duration) { h.res = res }

// A runner killed while writing a checkpoint leaves some of its key records
// durable and no marker: a torn checkpoint. With a population model the
// keys depend on one another through the shared part (the key
// "\x00population", written first), so the restore must take every key as
// of the last marker: the next runner then ends bit-identical to an
// uninterrupted worker, every event predicted, each repeat identical. Each
// case failed before restores set torn checkpoints aside (shared part
// only: the first replayed prediction differed), plain and with the log
// compacted up to the torn records (the cleaner removed every marker but
// the last, so the records before it are read with no marker between).
func TestTornCheckpointRestoresTheLastMarker(t *testing.T) {
	configs := []struct {
		name string
		cfg  func(t *testing.T) Config
	}{
		{"logreg-additive", func(*testing.T) Config { return shippedConfig(dim) }},
		{"logreg-mixture", func(t *testing.T) Config { return populationConfig(t, "logreg", "") }},
		{"perceptron-mixture", func(t *testing.T) Config { return populationConfig(t, "perceptron", "") }},
		{"population-off", func(t *testing.T) Config { return testConfig(t, "logreg", "") }},
	}
	tears := []struct {
		name    string
		durable func([]checkpoint.KeyRecord) []checkpoint.KeyRecord
	}{
		{"shared part only", func(k []checkpoint.KeyRecord) []checkpoint.KeyRecord { return k[:1] }},
		{"shared part and a prefix", func(k []checkpoint.KeyRecord) []checkpoint.KeyRecord { return k[:len(k)/2] }},
		{"a prefix without the shared part", func(k []checkpoint.KeyRecord) []checkpoint.KeyRecord { return k[1 : 1+len(k)/2] }},
		{"every key record", func(k []checkpoint.KeyRecord) []checkpoint.KeyRecord { return k }},
	}
	for _, c := range configs {
		for _, tear := range tears {
			for _, compacted := range []compaction{notCompacted, compactedBefore, compactedThrough} {
				t.Run(fmt.Sprintf("%s/%s/%s", c.name, tear.name, compacted), func(t *testing.T) {
					tornAndRestored(t, c.cfg(t), tear.durable, compacted)
				})
			}
		}
	}
}

// compaction is how much of the log the cleaner compacted before the
// restore: nothing, everything up to the torn records (their segment still
// active), or everything, torn records included — then the torn records
// superseded their keys' earlier ones, which only the marker's digest
// still counts: the restore does not verify, and the partition is rebuilt.
type compaction int

const (
	notCompacted compaction = iota
	compactedBefore
	compactedThrough
)

func (c compaction) String() string {
	return [...]string{"not-compacted", "compacted-before-the-torn-records", "compacted-through-them"}[c]
}

func tornAndRestored(t *testing.T, cfg Config, durable func([]checkpoint.KeyRecord) []checkpoint.KeyRecord, compacted compaction) {
	h := newHarness(t, 1500, 40, false)
	h.cfg = cfg
	crashAt, _, g, done := h.beforeSixthCheckpoint()
	torn := 0
	h.store.write.set(&fault{times: 1, lost: true})
	h.store.tear(func(keys []checkpoint.KeyRecord) []checkpoint.KeyRecord {
		if cfg.Population != keyed.PopulationOff && cfg.Population != "" && (len(keys) == 0 || keys[0].Key != keyed.PopulationKey) {
			t.Errorf("the checkpoint's first record is %q, not the shared part", keys[0].Key)
		}
		d := durable(keys)
		torn = len(d)
		return d
	})
	g.upto.Store(int64(crashAt))
	stoppedAtCrash(t, done)
	if torn == 0 {
		t.Fatal("the torn checkpoint wrote no key record")
	}
	switch log := h.store.Log(0); compacted {
	case compactedBefore:
		h.store.SetLog(0, compactLog(log, len(log)-torn))
	case compactedThrough:
		h.store.SetLog(0, compactLog(log, len(log)))
	}
	h.feed.bounded = true
	got := &restoredHook{}
	final := h.runner(2, newGate(1<<62), nil, got)
	if err := final.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := got.res.TornRecords(); n != torn {
		t.Errorf("the restore set aside %d records, want the %d torn", n, torn)
	}
	if rebuilt := compacted == compactedThrough; got.res.Verified == rebuilt || got.res.Mismatch != rebuilt || (got.res.Origin == FromInputs) != rebuilt {
		t.Errorf("restored from %v, verified %v, digest mismatch %v; want rebuilt from the inputs %v", got.res.Origin, got.res.Verified, got.res.Mismatch, rebuilt)
	}
	// The crashed interval's outputs were flushed before its key records
	// were written: each is repeated once, identically (check).
	if dups, want := h.check(final), predictionsIn(h.feed.recs, crashAt-h.every, crashAt); dups != want {
		t.Errorf("%d duplicate predictions, want %d (the crashed interval's)", dups, want)
	}
}

// compactLog compacts log as Kafka's cleaner does with its active segment
// starting at position head: a record before head is removed when a later
// record before head has the same record key.
func compactLog(log []checkpoint.Entry, head int) []checkpoint.Entry {
	last := map[string]int{}
	for i, e := range log[:head] {
		last[e.Key] = i
	}
	var out []checkpoint.Entry
	for i, e := range log {
		if i < head && last[e.Key] != i {
			continue
		}
		out = append(out, e)
	}
	return out
}
