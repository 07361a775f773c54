package pipeline

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
)

// failingLoad is a store whose Load fails after the inner store has handed
// every key record to the sink, as a changelog read that breaks near its
// end does.
type failingLoad struct{ *checkpoint.MemoryStore }

func (s failingLoad) Load(ctx context.Context, p int, sink checkpoint.KeySink) (checkpoint.Snapshot, error) {
	snap, err := s.MemoryStore.Load(ctx, p, sink)
	if err != nil {
		return snap, err
	}
	return snap, errors.New("fetch: broker went away")
}

// A restore that fails part way leaves the worker empty, so that the retry
// restores into an empty worker again and gets every key exactly.
func TestFailedRestoreLeavesWorkerEmpty(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, "lasec-ss", "")
	ref, _ := NewWorker(cfg, 0)
	run(t, ref, records(3, 600, 8))
	store := checkpoint.NewMemoryStore()
	if _, _, err := ref.Checkpoint(ctx, store); err != nil {
		t.Fatal(err)
	}
	want := logStates(t, ref) // restored without a replay: as the log holds them

	w, _ := NewWorker(cfg, 0)
	if _, err := w.Restore(ctx, failingLoad{store}); err == nil || !strings.Contains(err.Error(), "restore partition 0: fetch: broker went away") {
		t.Fatalf("restore error %v", err)
	}
	if w.Keys() != 0 {
		t.Fatalf("%d keys left after a failed restore, want 0", w.Keys())
	}
	res, err := w.Restore(ctx, store)
	if err != nil || len(res.Problems) != 0 {
		t.Fatalf("retry: %v %v", err, res.Problems)
	}
	got := logStates(t, w)
	missing, differing := 0, 0
	for k, s := range want {
		g, ok := got[k]
		switch {
		case !ok:
			missing++
		case !bytes.Equal(g, s):
			differing++
		}
	}
	if len(got) != len(want) || missing != 0 || differing != 0 {
		t.Fatalf("%d keys restored of %d: %d missing, %d differing", len(got), len(want), missing, differing)
	}
}

// Keys are built as their records are read, and the fallback rules hold as
// when the whole log was read first: a key whose latest record does not
// decode is not restored from a former owner's record that follows it (the
// key has a record), it is reported and replayed from the start; a bad
// record superseded by a good one costs nothing; a key recorded empty holds
// nothing.
func TestRestoreFallbackRulesWhileReading(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, "perceptron", "")
	ref, _ := NewWorker(cfg, 0)
	run(t, ref, records(5, 200, 3))
	good := states(t, ref)
	var someState []byte
	for _, s := range good {
		someState = s
		break
	}
	old, cur := checkpoint.NextEpoch(0, 1), checkpoint.NextEpoch(1<<32, 2)
	key := func(name string, e checkpoint.Epoch, through int64, state []byte) checkpoint.Entry {
		return checkpoint.Entry{Key: name, Value: checkpoint.EncodeKey(checkpoint.KeyRecord{Key: name, Epoch: e,
			AppliedThrough: [2]int64{through, checkpoint.NoOffset}, State: state})}
	}
	garbage := []byte{0xde, 0xad, 0xbe, 0xef}
	store := checkpoint.NewMemoryStore()
	if err := store.Claim(ctx, checkpoint.Ownership{Epoch: old, Owner: "old"}); err != nil {
		t.Fatal(err)
	}
	log := store.Log(0)
	log = append(log, key("a", old, 10, someState))
	claim := checkpoint.NewMemoryStore()
	if err := claim.Claim(ctx, checkpoint.Ownership{Epoch: cur, Owner: "new"}); err != nil {
		t.Fatal(err)
	}
	log = append(log, claim.Log(0)...)
	log = append(log,
		key("a", cur, 20, garbage),   // a's latest accepted record: undecodable
		key("a", old, 30, someState), // a former owner's late write: fenced, and a has a record
		key("b", cur, 20, garbage),   // superseded by the next
		key("b", cur, 40, someState),
		key("c", cur, 40, nil)) // recorded as holding nothing
	if err := claim.Write(ctx, nil, checkpoint.Marker{Epoch: cur, Through: [2]int64{50, checkpoint.NoOffset}}); err != nil {
		t.Fatal(err)
	}
	log = append(log, claim.Log(0)[1:]...) // the marker, after the claim
	store.SetLog(0, log)

	w, _ := NewWorker(cfg, 0)
	res, err := w.Restore(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if w.Keys() != 1 || w.keys["b"] == nil || w.keys["b"].Applied[EventsTopic] != 40 {
		t.Fatalf("held %d keys (%v), want b alone at offset 40", w.Keys(), w.keys)
	}
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Error(), `key "a"`) {
		t.Fatalf("problems %v, want key a's undecodable record alone", res.Problems)
	}
	if res.Fenced != 1 || res.From != [2]int64{0, 0} {
		t.Fatalf("fenced %d, replay from %v; want 1 and {0 0}", res.Fenced, res.From)
	}
}
