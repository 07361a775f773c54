package pipeline

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
)

// endedCommitter answers as the group coordinator does a member whose
// generation has ended: every commit is refused.
type endedCommitter struct{}

func (endedCommitter) Commit(context.Context, [2]int64) error {
	return fmt.Errorf("injected: the generation has ended: %w", ErrLost)
}

// A Runner's state is the log's as of its claim. Runner A (generation 6)
// reads the log, and its claim is held while B (generation 7) restores,
// claims and checkpoints; then A's claim lands, after B's records, and
// below B's claim. In the chaos run this was a member frozen during its
// restore: its generation ended with nothing processed, so it kept the state
// it had read, with its end after its own fenced claim, and resumed it
// later, catching up from there: B's checkpoints before that point were
// never read, and with the shipped population model every key diverged.
// Now A reads the log again up to its claim, sees B's, and stops (its
// generation has ended: the coordinator refuses its commit) or, when its
// generation is the group's (the group started over), claims above B from
// B's last checkpoint. Either way the next owner (resuming A's kept state,
// if any) ends bit-identical to one uninterrupted run.
func TestStateIsTheLogsAsOfTheClaim(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ended bool // A's generation ended: the coordinator refuses its commit
		stop  bool // A is stopped as its claim lands
	}{
		{"the claimer's generation ended while it restored", true, false},
		{"the claimer is stopped as its claim lands", true, true},
		{"the group started over", false, false},
	} {
		for _, c := range []struct {
			name string
			cfg  func(t *testing.T) Config
		}{
			{"logreg-additive", func(*testing.T) Config { return shippedConfig(dim) }},
			{"population-off", func(t *testing.T) Config { return testConfig(t, "logreg", "") }},
		} {
			t.Run(tc.name+"/"+c.name, func(t *testing.T) { claimLandsLate(t, c.cfg(t), tc.ended, tc.stop) })
		}
	}
}

func claimLandsLate(t *testing.T, cfg Config, ended, stop bool) {
	h := newHarness(t, 2400, 300, false) // many keys: B's last interval leaves most untouched
	h.cfg = cfg
	h.runUntil(1, 400)
	if ended {
		h.committers = map[int32]Committer{6: endedCommitter{}}
	}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func(o checkpoint.Ownership) {
		if o.Owner == "gen-6" {
			once.Do(func() { close(held); <-release })
		}
	}
	h.store.claimHook.Store(&hook)
	obsA := &restoredAs{}
	gateA := newGate(1600)
	a := h.runner(6, gateA, nil, obsA)
	stopA, doneA := goRun(t, a)
	<-held // A has read the log, through offset 400's checkpoint

	obsB := &progress{}
	gateB := newGate(1400)
	b := h.runner(7, gateB, nil, obsB)
	stopB, doneB := goRun(t, b)
	eventually(t, "B's checkpoints through offset 1400", func() bool { return obsB.last.Load() == 1399 && obsB.checkpoints.Load() == 1000/int64(h.every) })
	if !ended { // B stops first: A claims above it and goes on from its last checkpoint
		stopB()
		if err := <-doneB; err != nil {
			t.Fatal(err)
		}
	}
	if stop {
		stopA()
	}
	close(release)
	if ended {
		if err := <-doneA; err != nil {
			t.Fatal(err)
		}
		if a.Kept() != nil {
			t.Fatal("a Runner that lost its claim kept its state")
		}
		// B goes on after A's claim, and stops.
		gateB.upto.Store(1400 + int64(h.every))
		eventually(t, "B's next checkpoint", func() bool {
			return obsB.last.Load() == 1399+int64(h.every) && obsB.checkpoints.Load() == 1000/int64(h.every)+1
		})
		stopB()
		if err := <-doneB; err != nil {
			t.Fatal(err)
		}
	} else {
		eventually(t, "A's progress through offset 1600", func() bool { return obsA.last.Load() == 1599 })
		if m := obsA.res.Marker; m == nil || m.Through[EventsTopic] != 1399 {
			t.Fatalf("A resumed from the checkpoint %+v, want B's last (through offset 1399)", m)
		}
		stopA()
		if err := <-doneA; err != nil {
			t.Fatal(err)
		}
	}
	h.kept = a.Kept()
	if dups := h.check(h.finish(8)); dups > 2400 {
		t.Fatalf("%d duplicate predictions", dups)
	}
}

// goRun runs r on a goroutine until stop is called (or the test ends); done
// gets Run's result.
func goRun(t *testing.T, r *Runner) (stop context.CancelFunc, done <-chan error) {
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	ch := make(chan error, 1)
	go func() { ch <- r.Run(ctx) }()
	return stop, ch
}
