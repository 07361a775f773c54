package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
)

// A restore refuses a changelog that cannot be complete — one that started
// over (records before any ownership claim) or one without a checkpoint as
// recent as the group's committed offset — and accepts a complete one.
func TestRestoreRefusesAChangelogThatCannotBeComplete(t *testing.T) {
	claim := func(st checkpoint.Store) {
		if err := st.Claim(context.Background(), checkpoint.Ownership{Partition: 0, Epoch: checkpoint.NextEpoch(0, 1), Owner: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	// checkpointed runs records through a worker and checkpoints it into st
	// under the epoch of the claim (or a first epoch without one).
	checkpointed := func(st checkpoint.Store, n int) {
		w, err := NewWorker(testConfig(t, "perceptron", ""), 0)
		if err != nil {
			t.Fatal(err)
		}
		w.SetEpoch(checkpoint.NextEpoch(0, 1))
		run(t, w, records(3, n, 4))
		if _, _, err := w.Checkpoint(context.Background(), st); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		build     func(st checkpoint.Store)
		committed int64
		frag      string // "": accepted
	}{
		{"complete", func(st checkpoint.Store) { claim(st); checkpointed(st, 200) }, 200, ""},
		{"complete, no commit yet", func(st checkpoint.Store) { claim(st); checkpointed(st, 200) }, -1, ""},
		{"empty, nothing committed", func(st checkpoint.Store) {}, -1, ""},
		{"started over", func(st checkpoint.Store) { checkpointed(st, 200) }, -1, "before any ownership claim"},
		{"empty, offsets committed", func(st checkpoint.Store) {}, 500, "holds none"},
		{"behind the commit", func(st checkpoint.Store) { claim(st); checkpointed(st, 200) }, 500, "through offset 199"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := checkpoint.NewMemoryStore()
			tc.build(st)
			w, err := NewWorker(testConfig(t, "perceptron", ""), 0)
			if err != nil {
				t.Fatal(err)
			}
			res, err := w.Restore(context.Background(), st)
			if err != nil {
				t.Fatal(err)
			}
			err = res.complete(0, tc.committed)
			if (err == nil) != (tc.frag == "") || (err != nil && (!errors.Is(err, ErrChangelogIncomplete) || !strings.Contains(err.Error(), tc.frag))) {
				t.Fatalf("complete: %v, want %q", err, tc.frag)
			}
		})
	}
}
