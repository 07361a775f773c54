package pipeline

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
)

// phases records the phase a Runner published at each call of its store's
// Load, its sink's Write and its RecordHook.
type phases struct {
	r                 atomic.Pointer[Runner]
	mu                sync.Mutex
	load, write, proc map[Phase]int
}

func newPhases() *phases {
	return &phases{load: map[Phase]int{}, write: map[Phase]int{}, proc: map[Phase]int{}}
}

func (p *phases) seen(m map[Phase]int) {
	ph := p.r.Load().Snapshot().Phase
	p.mu.Lock()
	m[ph]++
	p.mu.Unlock()
}

// phaseStore notes the phase when the Runner loads its checkpoint.
type phaseStore struct {
	*testStore
	ph *phases
}

func (s phaseStore) Load(ctx context.Context, p int, sink checkpoint.KeySink) (checkpoint.Snapshot, error) {
	s.ph.seen(s.ph.load)
	return s.testStore.Load(ctx, p, sink)
}

// phaseSink notes the phase when the write-behind writes outputs.
type phaseSink struct {
	*testSink
	ph *phases
}

func (s phaseSink) Write(ctx context.Context, outs []Output) error {
	s.ph.seen(s.ph.write)
	return s.testSink.Write(ctx, outs)
}

// phaseHook notes the phase after each record.
type phaseHook struct{ ph *phases }

func (h phaseHook) Record(*Fetched, Effect) { h.ph.seen(h.ph.proc) }

// A Runner's phase is one value that moves forward: idle before Run,
// restoring while it loads its checkpoint, running while it processes
// records, stopping while the final checkpoint's outputs are written, and
// stopped or failed once Run has returned.
func TestRunnerPhases(t *testing.T) {
	cases := []struct {
		name      string
		fault     *fault // the sink's, from its first write
		wantPhase Phase
		wantErr   bool
	}{
		{name: "source ends", wantPhase: PhaseStopped},
		{name: "sink fails", fault: &fault{times: -1}, wantPhase: PhaseFailed, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, 200, 5, true)
			ph := newPhases()
			sink := &testSink{out: h.out}
			sink.before.set(c.fault)
			r, err := NewRunner(RunnerConfig{Partition: 0, Pipeline: h.cfg, Store: phaseStore{h.store, ph}, Open: h.feed.opener(newGate(1 << 62)),
				Sink: phaseSink{sink, ph}, Committer: h.com, CheckpointEvery: 1 << 30, CheckpointPeriod: 1 << 62,
				Retry: Backoff{Initial: 1, Max: 1, Timeout: 1}, Hooks: []Hook{phaseHook{ph}}})
			if err != nil {
				t.Fatal(err)
			}
			ph.r.Store(r)
			if got := r.Snapshot().Phase; got != PhaseIdle {
				t.Fatalf("before Run: phase %v, want idle", got)
			}
			err = r.Run(context.Background())
			if (err != nil) != c.wantErr {
				t.Fatalf("Run: %v; want an error %v", err, c.wantErr)
			}
			if got := r.Snapshot().Phase; got != c.wantPhase {
				t.Fatalf("after Run: phase %v, want %v", got, c.wantPhase)
			}
			// Every record is processed running; the only outputs written
			// are the final checkpoint's (no checkpoint before), stopping.
			want := map[string]map[Phase]int{
				"load":  {PhaseRestoring: 1},
				"proc":  {PhaseRunning: len(h.feed.recs)},
				"write": {PhaseStopping: 1},
			}
			got := map[string]map[Phase]int{"load": ph.load, "proc": ph.proc, "write": ph.write}
			for k := range want {
				if !maps.Equal(got[k], want[k]) {
					t.Errorf("%s: phases seen %v, want %v", k, got[k], want[k])
				}
			}
		})
	}
}
