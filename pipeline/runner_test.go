package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/internal/poll"
	"github.com/driftstream/driftstream/topics"
)

// feed is a partition's input log, shared by the runners of a test. A
// runner's source delivers records below its gate and waits at the gate (a
// live partition); with bounded set it closes at the end of the log.
type feed struct {
	recs    []Record
	bounded bool
}

// gatedSource reads a feed from an offset up to a movable gate.
type gatedSource struct {
	ch     chan []Fetched
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *gatedSource) Records() <-chan []Fetched { return s.ch }
func (s *gatedSource) Close() error              { s.cancel(); <-s.done; return nil }

// gate bounds what a runner may read; failAt injects one read error at an
// offset (once).
type gate struct {
	upto   atomic.Int64
	failAt atomic.Int64
}

func newGate(upto int64) *gate {
	g := &gate{}
	g.upto.Store(upto)
	g.failAt.Store(-1)
	return g
}

func (f *feed) opener(g *gate) Opener {
	return func(ctx context.Context, start From) (Source, error) {
		from := start.Topics
		ctx, cancel := context.WithCancel(ctx)
		s := &gatedSource{ch: make(chan []Fetched, 16), cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(s.done)
			for off := from[EventsTopic]; ; {
				if off >= int64(len(f.recs)) && f.bounded {
					close(s.ch)
					return
				}
				if off >= g.upto.Load() || off >= int64(len(f.recs)) {
					select {
					case <-ctx.Done():
						return
					case <-time.After(time.Millisecond):
					}
					continue
				}
				// A batch of 1 to 7 records below the gate (varying with the
				// offset), cut short by an injected read error, which ends it.
				var batch []Fetched
				failed := false
				for n := 1 + int(off%7); len(batch) < n && off < g.upto.Load() && off < int64(len(f.recs)); off++ {
					if g.failAt.CompareAndSwap(off, -1) {
						batch, failed = append(batch, Fetched{Err: Retriable(errors.New("injected read error"))}), true
						break
					}
					batch = append(batch, Fetched{Record: f.recs[off], HighWatermark: int64(len(f.recs))})
				}
				select {
				case s.ch <- batch:
				case <-ctx.Done():
					return
				}
				if failed {
					return
				}
			}
		}()
		return s, nil
	}
}

// outputs collects what sinks wrote, over every runner of a test.
type outputs struct {
	mu    sync.Mutex
	preds map[string][]string // event id → prediction messages
	dead  int
}

func newOutputs() *outputs { return &outputs{preds: map[string][]string{}} }

// fault makes one operation fail: times failures in a row (−1: always),
// with a retriable or permanent error, or ErrLost (a crash: nothing more is
// written by that runner).
type fault struct {
	mu        sync.Mutex
	times     int
	retriable bool
	lost      bool
	calls     int
}

// faultSlot holds the fault armed for one operation; tests arm it while the
// runner's write-behind goroutine reads it.
type faultSlot struct{ p atomic.Pointer[fault] }

func (s *faultSlot) set(f *fault) { s.p.Store(f) }
func (s *faultSlot) hit() error   { return s.p.Load().hit() }

func (f *fault) hit() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.times == 0 {
		return nil
	}
	if f.times > 0 {
		f.times--
	}
	switch {
	case f.lost:
		return fmt.Errorf("injected crash: %w", ErrLost)
	case f.retriable:
		return Retriable(errors.New("injected transient error"))
	}
	return errors.New("injected permanent error")
}

// testSink writes to outputs unless its fault says otherwise; after (when
// set) fails after writing, as a crash right after the flush would.
type testSink struct {
	out    *outputs
	before faultSlot
	after  faultSlot
}

func (s *testSink) Write(_ context.Context, outs []Output) error {
	if err := s.before.hit(); err != nil {
		return err
	}
	s.out.mu.Lock()
	for _, o := range outs {
		switch o.Kind {
		case OutPrediction:
			var m topics.Prediction
			json.Unmarshal(o.Value, &m)
			s.out.preds[m.ID] = append(s.out.preds[m.ID], string(o.Value))
		case OutDeadLetter:
			s.out.dead++
		}
	}
	s.out.mu.Unlock()
	return s.after.hit()
}

// testStore wraps a MemoryStore: write fails per its fault; with durable
// set, a write that fails as lost leaves the key records durable selects
// (in the order given: by key, a shared part first) and no marker, as a
// writer killed between its produce requests does.
type testStore struct {
	*checkpoint.MemoryStore
	write   faultSlot
	durable atomic.Pointer[func([]checkpoint.KeyRecord) []checkpoint.KeyRecord]
	loads   atomic.Int64
	ranges  atomic.Int64
	// rangeErr, when set, is what LoadRange fails with.
	rangeErr error
	// claimHook, when set, runs before each claim (a test holds one there).
	claimHook atomic.Pointer[func(checkpoint.Ownership)]
}

// tear makes the store's next lost write leave the key records durable
// selects and no marker.
func (s *testStore) tear(durable func([]checkpoint.KeyRecord) []checkpoint.KeyRecord) {
	s.durable.Store(&durable)
}

// ClaimAt runs the claim hook, when set, before the claim; the claim then
// lands even if its caller has stopped meanwhile, as a produce request in
// flight does.
func (s *testStore) ClaimAt(ctx context.Context, o checkpoint.Ownership) (int64, error) {
	if hook := s.claimHook.Load(); hook != nil {
		(*hook)(o)
		ctx = context.WithoutCancel(ctx)
	}
	return s.MemoryStore.ClaimAt(ctx, o)
}

func (s *testStore) Load(ctx context.Context, p int, sink checkpoint.KeySink) (checkpoint.Snapshot, error) {
	s.loads.Add(1)
	return s.MemoryStore.Load(ctx, p, sink)
}

// LoadRange counts the ranges read, and fails with rangeErr when it is set
// (a tail that retention deleted).
func (s *testStore) LoadRange(ctx context.Context, p int, from, to int64, snap *checkpoint.Snapshot) error {
	s.ranges.Add(1)
	if s.rangeErr != nil {
		return s.rangeErr
	}
	return s.MemoryStore.LoadRange(ctx, p, from, to, snap)
}

func (s *testStore) Write(ctx context.Context, keys []KeyRecordAlias, m checkpoint.Marker) error {
	_, err := s.WriteAt(ctx, keys, m)
	return err
}

// WriteAt is where the faults are (the Runner writes through it: the
// MemoryStore reports positions).
func (s *testStore) WriteAt(ctx context.Context, keys []KeyRecordAlias, m checkpoint.Marker) (int64, error) {
	if err := s.write.hit(); err != nil {
		if d := s.durable.Load(); d != nil && errors.Is(err, ErrLost) {
			log := s.MemoryStore.Log(m.Partition)
			for _, k := range (*d)(keys) {
				log = append(log, checkpoint.Entry{Key: k.Key, Value: checkpoint.EncodeKey(k)})
			}
			s.MemoryStore.SetLog(m.Partition, log)
		}
		return 0, err
	}
	return s.MemoryStore.WriteAt(ctx, keys, m)
}

// KeyRecordAlias keeps testStore's method set identical to Store's.
type KeyRecordAlias = checkpoint.KeyRecord

// testCommitter remembers the committed offsets.
type testCommitter struct {
	fault faultSlot
	mu    sync.Mutex
	next  [2]int64
}

func (c *testCommitter) Commit(_ context.Context, next [2]int64) error {
	if err := c.fault.hit(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range next {
		if next[i] >= 0 {
			c.next[i] = next[i]
		}
	}
	return nil
}

func (c *testCommitter) committed() [2]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next
}

// progress follows a runner's last processed offset.
type progress struct {
	last, checkpoints atomic.Int64
	retries           atomic.Int64
}

func (p *progress) Checkpointed(int, int, KeyCount, time.Duration) { p.checkpoints.Add(1) }

func (p *progress) Record(f *Fetched, _ Effect) { p.last.Store(f.Offset) }
func (p *progress) Retrying(Step, error, int, time.Duration) {
	p.retries.Add(1)
}

// harness runs runners of one partition over a shared feed, store, sink
// outputs and committer.
type harness struct {
	t     *testing.T
	cfg   Config
	feed  *feed
	store *testStore
	out   *outputs
	com   *testCommitter
	every int
	kept  *Kept // given to the next runner
	// cacheKeys, when positive, gives each runner a Pebble key store and
	// holds that many keys in memory; keyStores are the stores given.
	cacheKeys int
	keyStores []*testKeys
	// committers, when set, gives a generation's runner its own committer
	// instead of com.
	committers map[int32]Committer
}

func newHarness(t *testing.T, n, keys int, bounded bool) *harness {
	cfg := testConfig(t, "lasec-ss", `{"a":0.3}`)
	return &harness{t: t, cfg: cfg, feed: &feed{recs: records(11, n, keys), bounded: bounded},
		store: &testStore{MemoryStore: checkpoint.NewMemoryStore()}, out: newOutputs(), com: &testCommitter{}, every: 40}
}

func (h *harness) runner(gen int32, g *gate, sink *testSink, obs Hook) *Runner {
	h.t.Helper()
	if sink == nil {
		sink = &testSink{out: h.out}
	}
	var com Committer = h.com
	if c, ok := h.committers[gen]; ok {
		com = c
	}
	cfg := RunnerConfig{Partition: 0, Pipeline: h.cfg, Store: h.store, Open: h.feed.opener(g), Sink: sink,
		Committer: com, Generation: gen, Owner: fmt.Sprintf("gen-%d", gen), Committed: h.com.committed(),
		CheckpointEvery: h.every, CheckpointPeriod: time.Hour, FinalTimeout: 5 * time.Second,
		Retry: Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond, Timeout: 200 * time.Millisecond}, Hooks: []Hook{obs}, Kept: h.kept}
	if h.cacheKeys > 0 {
		ks := newTestKeys(h.t)
		h.keyStores = append(h.keyStores, ks)
		cfg.KeyStore, cfg.CacheKeys = ks, h.cacheKeys
	}
	r, err := NewRunner(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// finish runs a last runner over the whole bounded feed.
func (h *harness) finish(gen int32) *Runner {
	h.feed.bounded = true
	r := h.runner(gen, newGate(1<<62), nil, nil)
	if err := r.Run(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	return r
}

// check compares with one uninterrupted worker: every event predicted, each
// duplicate identical, final states byte-identical; it returns the number of
// duplicate predictions.
func (h *harness) check(final *Runner) (dups int) {
	h.t.Helper()
	ref, _ := NewWorker(h.cfg, 0)
	for _, r := range h.feed.recs {
		ref.Process(context.Background(), r)
	}
	want := map[string]string{}
	for _, o := range ref.TakeOutputs() {
		if o.Kind == OutPrediction {
			var m topics.Prediction
			json.Unmarshal(o.Value, &m)
			want[m.ID] = string(o.Value)
		}
	}
	missing, differing := 0, 0
	for id, p := range want {
		got := h.out.preds[id]
		if len(got) == 0 {
			missing++
		}
		for _, g := range got {
			if g != p {
				differing++
			}
		}
		dups += max(0, len(got)-1)
	}
	if missing != 0 || differing != 0 || len(h.out.preds) != len(want) {
		h.t.Fatalf("%d events: %d missing, %d differing predictions, %d ids predicted", len(want), missing, differing, len(h.out.preds))
	}
	got, exp := states(h.t, final.w), states(h.t, ref)
	if len(got) != len(exp) {
		h.t.Fatalf("%d keys, want %d", len(got), len(exp))
	}
	for k, b := range exp {
		if !bytes.Equal(got[k], b) {
			h.t.Fatalf("key %s differs from the uninterrupted run", k)
		}
	}
	return dups
}

// eventually polls cond for up to 10 s (poll.Until).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, cond, poll.Text(what))
}

// predictionsIn counts the events of recs[from:to].
func predictionsIn(recs []Record, from, to int) int {
	n := 0
	for _, r := range recs[from:to] {
		if ev, err := topics.Decode(r.Value, 0); err == nil && ev.Kind == topics.Input {
			n++
		}
	}
	return n
}

// A crash at each step of the checkpoint protocol, then a restart: nothing
// is missing, duplicates are identical and exactly as many as the protocol
// allows for that step, and the final states are byte-identical.
func TestCrashAtEveryCheckpointStep(t *testing.T) {
	cases := []struct {
		name string
		arm  func(h *harness, sink *testSink)
		// dups is the exact number of repeated predictions, given the events
		// of the crashed checkpoint interval.
		dups func(interval int) int
	}{
		{"before the flush", func(h *harness, s *testSink) { s.before.set(&fault{times: 1, lost: true}) }, func(int) int { return 0 }},
		{"after the flush", func(h *harness, s *testSink) { s.after.set(&fault{times: 1, lost: true}) }, func(n int) int { return n }},
		{"after the key records, before the marker", func(h *harness, s *testSink) {
			h.store.write.set(&fault{times: 1, lost: true})
			h.store.tear(func(keys []checkpoint.KeyRecord) []checkpoint.KeyRecord { return keys })
		}, func(n int) int { return n }}, // the key records without their marker are set aside: the interval is replayed
		{"after the marker, before the commit", func(h *harness, s *testSink) { h.com.fault.set(&fault{times: 1, lost: true}) }, func(int) int { return 0 }},
	}
	for _, c := range cases {
		for _, cacheKeys := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/cache-%d", c.name, cacheKeys), func(t *testing.T) { crashAtStep(t, c.arm, c.dups, cacheKeys) })
		}
	}
}

// crashAtStep is one case of TestCrashAtEveryCheckpointStep; with cacheKeys
// positive, each runner holds that many keys in memory, the others in a key
// store.
func crashAtStep(t *testing.T, arm func(h *harness, sink *testSink), dups func(interval int) int, cacheKeys int) {
	h := newHarness(t, 1200, 9, false)
	h.cacheKeys = cacheKeys
	// A first runner checkpoints 5 times, then crashes in the 6th.
	crashAt, sink, g, done := h.beforeSixthCheckpoint()
	arm(h, sink)
	g.upto.Store(int64(crashAt)) // the next record triggers the sixth checkpoint
	stoppedAtCrash(t, done)
	final := h.finish(2)
	if got, want := h.check(final), dups(predictionsIn(h.feed.recs, crashAt-h.every, crashAt)); got != want {
		t.Fatalf("%d duplicate predictions, want %d", got, want)
	}
	if cacheKeys > 0 && !h.keyStores[0].isClosed() {
		t.Error("the crashed runner left its key store open")
	}
}

// Transient failures of the store, the sink, the committer and the source
// are retried in place: no duplicate output, no lost event, same states.
func TestTransientFailuresRetriedInPlace(t *testing.T) {
	cases := []struct {
		name string
		arm  func(h *harness, s *testSink, g *gate)
	}{
		{"store", func(h *harness, _ *testSink, _ *gate) { h.store.write.set(&fault{times: 3, retriable: true}) }},
		{"sink", func(_ *harness, s *testSink, _ *gate) { s.before.set(&fault{times: 3, retriable: true}) }},
		{"commit", func(h *harness, _ *testSink, _ *gate) { h.com.fault.set(&fault{times: 3, retriable: true}) }},
		{"source", func(_ *harness, _ *testSink, g *gate) { g.failAt.Store(333) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, 900, 9, true)
			sink, g, obs := &testSink{out: h.out}, newGate(1<<62), &progress{}
			c.arm(h, sink, g)
			r := h.runner(1, g, sink, obs)
			if err := r.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if obs.retries.Load() == 0 {
				t.Fatal("nothing was retried")
			}
			if dups := h.check(r); dups != 0 {
				t.Fatalf("%d duplicate predictions after in-place retries", dups)
			}
		})
	}
}

// A permanent error, or a transient one that outlasts the retry bound, ends
// the partition with a PartitionError naming the step; outputs are written
// at most once before it, and a restart with the fault gone loses nothing
// and repeats at most two checkpoint intervals (the write-behind writes the
// outputs of the interval after a checkpoint while the checkpoint's own
// records are written).
func TestPersistentFailureEndsThePartition(t *testing.T) {
	cases := []struct {
		name string
		step Step
		arm  func(h *harness, s *testSink)
	}{
		{"store permanent", StepStore, func(h *harness, _ *testSink) { h.store.write.set(&fault{times: -1}) }},
		{"store transient past the bound", StepStore, func(h *harness, _ *testSink) { h.store.write.set(&fault{times: -1, retriable: true}) }},
		{"sink permanent", StepSink, func(_ *harness, s *testSink) { s.before.set(&fault{times: -1}) }},
		{"commit permanent", StepCommit, func(h *harness, _ *testSink) { h.com.fault.set(&fault{times: -1}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, 600, 9, true)
			sink := &testSink{out: h.out}
			c.arm(h, sink)
			err := h.runner(1, newGate(1<<62), sink, nil).Run(context.Background())
			var pe *PartitionError
			if !errors.As(err, &pe) || pe.Step != c.step {
				t.Fatalf("err = %v, want a partition error at %s", err, c.step)
			}
			if n := len(h.out.preds); n > 2*h.every {
				t.Fatalf("%d predictions written before the failure, more than two intervals (%d)", n, 2*h.every)
			}
			h.store.write.set(nil)
			sink.before.set(nil)
			h.com.fault.set(nil)
			final := h.finish(2)
			if dups := h.check(final); dups > 2*h.every {
				t.Fatalf("%d duplicates after the restart, more than two intervals", dups)
			}
		})
	}
}

// The zombie: a first owner stalls past its session, a second takes over and
// checkpoints, the first wakes up and writes key records and a marker (its
// commit is then refused), the second checkpoints once more and dies without
// a final checkpoint, and a third restores. Fencing keeps the stale writes out: no
// event missing, no prediction differing, states byte-identical.
func TestZombieWriterIsFenced(t *testing.T) {
	h := newHarness(t, 2400, 300, false) // many keys: B's last interval leaves most untouched
	ctx := context.Background()
	obsA, obsB := &progress{}, &progress{}
	gateA := newGate(400)
	a := h.runner(1, gateA, nil, obsA)
	doneA := make(chan error, 1)
	go func() { doneA <- a.Run(ctx) }()
	// A has processed and checkpointed everything below its gate: it is
	// now "frozen" there, reading nothing.
	eventually(t, "the first owner's progress", func() bool { return obsA.last.Load() == 399 && obsA.checkpoints.Load() == 400/int64(h.every) })

	bctx, crashB := context.WithCancel(ctx)
	gateB := newGate(1400)
	bSink := &testSink{out: h.out}
	b := h.runner(2, gateB, bSink, obsB)
	doneB := make(chan error, 1)
	go func() { doneB <- b.Run(bctx) }()
	// B has checkpointed its last full interval, so the refused commit below is A's.
	eventually(t, "the second owner's progress", func() bool { return obsB.last.Load() == 1399 && obsB.checkpoints.Load() == 1000/int64(h.every) })

	// A wakes up: it processes further, checkpoints (stale), and its commit is
	// refused because the group moved on.
	h.com.fault.set(&fault{times: 1, lost: true})
	gateA.upto.Store(800)
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	fenced := 0
	for _, e := range h.store.Log(0) {
		if rec, err := checkpoint.Decode(e.Value); err == nil && rec.Key != nil && rec.Key.Epoch>>32 == 1 && len(rec.Key.State) > 0 {
			fenced++
		}
	}
	// B checkpoints once more — its marker now follows the stale records —
	// and dies right after: no final checkpoint, no flush.
	gateB.upto.Store(1400 + int64(h.every))
	eventually(t, "the second owner's next checkpoint", func() bool { return obsB.checkpoints.Load() == 1000/int64(h.every)+1 })
	bSink.before.set(&fault{times: -1, lost: true})
	crashB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	snap, _ := h.store.Load(ctx, 0, nil)
	if snap.Fenced == 0 {
		t.Fatal("the stale writes were not fenced")
	}
	final := h.finish(3)
	dups := h.check(final)
	// Every key the zombie wrote after B's claim is written again by the
	// final runner's first checkpoint, before it processes a record: the
	// cleaner can then never keep the zombie's record in place of the key's.
	claimed, done := false, false
	stale, again := map[string]bool{}, map[string]bool{}
	for _, e := range h.store.Log(0) {
		rec, err := checkpoint.Decode(e.Value)
		switch {
		case err != nil || done:
		case rec.Owner != nil && rec.Owner.Epoch>>32 == 2:
			claimed = true
		case rec.Marker != nil && rec.Marker.Epoch>>32 == 3:
			done = true // the final runner's first checkpoint ends
		case rec.Key != nil && rec.Key.Epoch>>32 == 3:
			again[rec.Key.Key] = true
		case rec.Key != nil && claimed && rec.Key.Epoch>>32 == 1:
			stale[rec.Key.Key] = true
		}
	}
	for key := range stale {
		if !again[key] {
			t.Errorf("key %q: the zombie's record is not superseded by the final runner's first checkpoint", key)
		}
	}
	t.Logf("%d records of the first epoch in the log, %d fenced at restore (%d keys written again at once), %d duplicate predictions (identical)", fenced, snap.Fenced, len(stale), dups)
}

// errGenerationEnded stands for kafka-go's: the error a group generation's
// context reports, which is not context.Canceled.
var errGenerationEnded = errors.New("consumer group generation has ended")

// endedCtx is a context whose Err is errGenerationEnded once done is closed.
type endedCtx struct {
	context.Context
	done chan struct{}
}

func (c endedCtx) Done() <-chan struct{} { return c.done }
func (c endedCtx) Err() error {
	select {
	case <-c.done:
		return errGenerationEnded
	default:
		return nil
	}
}

// blockingStore's Load waits for its context to end, as a dial to a broker
// that does not answer would.
// blockingStore's Load blocks until its context ends; loading is closed
// once a Load has started.
type blockingStore struct {
	*checkpoint.MemoryStore
	loading chan struct{}
	once    *sync.Once
}

func (s blockingStore) Load(ctx context.Context, _ int, _ checkpoint.KeySink) (checkpoint.Snapshot, error) {
	s.once.Do(func() { close(s.loading) })
	<-ctx.Done()
	return checkpoint.Snapshot{}, fmt.Errorf("failed to dial: %w", ctx.Err())
}

// A partition revoked while it restores stops quietly, whatever error the
// interrupted step reports: it is the stop, not a failure, and the Runner
// ends stopped.
func TestRevokedDuringRestoreIsNoFailure(t *testing.T) {
	h := newHarness(t, 100, 3, true)
	store := blockingStore{MemoryStore: checkpoint.NewMemoryStore(), loading: make(chan struct{}), once: new(sync.Once)}
	r, err := NewRunner(RunnerConfig{Partition: 0, Pipeline: h.cfg, Store: store, Open: h.feed.opener(newGate(1 << 62)),
		Sink: &testSink{out: h.out}, CheckpointEvery: 10, CheckpointPeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := endedCtx{Context: context.Background(), done: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-store.loading // the restore has begun: revoke it now, during the restore
	if got := r.Snapshot().Phase; got != PhaseRestoring {
		t.Fatalf("while loading: phase %v, want restoring", got)
	}
	close(ctx.done)
	if err := <-done; err != nil {
		t.Fatalf("a revoked restore failed the partition: %v", err)
	}
	if got := r.Snapshot().Phase; got != PhaseStopped {
		t.Fatalf("after a revoked restore: phase %v, want stopped", got)
	}
}

// With a flush interval, predictions are written within it, long before the
// next checkpoint; nothing is written twice, and the marker still follows.
func TestFlushBetweenCheckpoints(t *testing.T) {
	h := newHarness(t, 200, 5, false)
	sink := &testSink{out: h.out}
	r, err := NewRunner(RunnerConfig{Partition: 0, Pipeline: h.cfg, Store: h.store, Open: h.feed.opener(newGate(100)), Sink: sink,
		Committer: h.com, CheckpointEvery: 1 << 30, CheckpointPeriod: time.Hour, FlushInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	predicted := func() int {
		h.out.mu.Lock()
		defer h.out.mu.Unlock()
		return len(h.out.preds)
	}
	events := 0
	for _, rec := range h.feed.recs[:100] {
		if bytes.Contains(rec.Value, []byte(`"x"`)) {
			events++
		}
	}
	eventually(t, "predictions written before any checkpoint", func() bool { return predicted() == events })
	if snap, _ := h.store.Load(context.Background(), 0, nil); snap.Marker != nil {
		t.Fatal("a checkpoint was written: the flush interval is not what wrote the outputs")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	for id, ps := range h.out.preds {
		if len(ps) != 1 {
			t.Fatalf("event %s predicted %d times", id, len(ps))
		}
	}
	if snap, _ := h.store.Load(context.Background(), 0, nil); snap.Marker == nil {
		t.Fatal("no marker after the stop")
	}
}

// restoredAs remembers how a runner got its state.
type restoredAs struct {
	progress
	res Restored
}

func (o *restoredAs) Restored(res Restored, _ KeyCount, _ time.Duration) { o.res = res }

// runUntil runs a runner of generation gen up to offset upto, stops it as a
// revocation would, and returns it.
func (h *harness) runUntil(gen int32, upto int64) *Runner {
	h.t.Helper()
	obs := &progress{}
	r := h.runner(gen, newGate(upto), nil, obs)
	ctx, revoke := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	eventually(h.t, fmt.Sprintf("generation %d's progress", gen), func() bool { return obs.last.Load() == upto-1 })
	revoke()
	if err := <-done; err != nil {
		h.t.Fatal(err)
	}
	return r
}

// A partition that comes back to the same process after a clean stop
// resumes from the state it kept, without reading the store, when nothing
// was written to its log since; when other owners wrote in between, it
// catches up from the log's tail (also when one of them claimed an epoch
// above its first claim, which it then claims above), and restores from the
// store only when the tail cannot be read. Every way ends byte-identical to
// one uninterrupted run, with no prediction missing, differing or repeated.
func TestKeptStateResumesOnlyWhenNothingCameBetween(t *testing.T) {
	for _, tc := range []struct {
		name      string
		owners    int // other owners in between
		cacheKeys int
		tailGone  bool
		corrupt   bool // a key record of the tail garbled
	}{
		{"nothing in between", 0, 0, false, false},
		{"another owner in between", 1, 0, false, false},
		{"two owners in between", 2, 0, false, false},
		{"another owner in between, tail gone", 1, 0, true, false},
		{"nothing in between, key store", 0, 5, false, false},
		{"another owner in between, key store", 1, 5, false, false},
		{"two owners in between, key store", 2, 5, false, false},
		{"another owner in between, tail gone, key store", 1, 5, true, false},
		{"another owner in between, a record of it garbled", 1, 0, false, true},
		{"another owner in between, a record of it garbled, key store", 1, 5, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1200, 50, false)
			h.cacheKeys = tc.cacheKeys
			for i := range h.feed.recs[410:690] { // keys the kept state has never seen
				if rec := &h.feed.recs[410+i]; rec.Offset%5 == 0 && bytes.Contains(rec.Value, []byte(`"x"`)) {
					rec.Key = fmt.Appendf(nil, "late-%d", rec.Offset%3)
				}
			}
			a := h.runUntil(1, 400)
			if a.Kept() == nil {
				t.Fatal("a clean stop kept no state")
			}
			gens := []int32{2, 4} // the second one's epoch is above the first claim of c (generation 3)
			for i := range tc.owners {
				h.runUntil(gens[i], int64(500+100*i))
			}
			end := int64(len(h.store.Log(0)))
			if tc.corrupt { // the last key record the other owner wrote
				log := h.store.Log(0)
				i := len(log) - 2 // before its marker
				log[i].Value = append([]byte(nil), log[i].Value...)
				log[i].Value[len(log[i].Value)-1] ^= 0xff
				h.store.SetLog(0, log)
			}
			loads := h.store.loads.Load()
			h.store.rangeErr = map[bool]error{true: checkpoint.ErrTailGone}[tc.tailGone]
			h.kept, h.feed.bounded = a.Kept(), true
			obs := &restoredAs{}
			c := h.runner(3, newGate(1<<62), nil, obs)
			if err := c.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			between := tc.owners > 0
			resumed := !tc.tailGone
			wantRanges := map[bool]int64{false: 0, true: int64(min(tc.owners, 2))}[between]
			if got := h.store.loads.Load() - loads; obs.res.Origin.Resumed() != resumed || got != map[bool]int64{true: 0, false: 1}[resumed] || h.store.ranges.Load() != wantRanges {
				t.Fatalf("resumed %v after %d loads and %d ranges of the store; want resumed %v, %d ranges", obs.res.Origin.Resumed(), got, h.store.ranges.Load(), resumed, wantRanges)
			}
			// Caught up through everything the others wrote, up to c's claim
			// (and, past an epoch above it, its second claim).
			if want := map[bool]int64{false: 0, true: end - a.Kept().end}[between && resumed]; tc.owners < 2 && obs.res.CaughtUp != want {
				t.Fatalf("caught up %d positions, want %d", obs.res.CaughtUp, want)
			}
			if tc.owners == 2 && obs.res.CaughtUp != end+1-a.Kept().end {
				t.Fatalf("caught up %d positions, want %d (the tail and c's first claim)", obs.res.CaughtUp, end+1-a.Kept().end)
			}
			if problems := len(obs.res.Problems); problems != map[bool]int{false: 0, true: 1}[tc.corrupt] {
				t.Fatalf("%d problems reported: %v", problems, obs.res.Problems)
			}
			if tc.corrupt && obs.res.From[EventsTopic] >= 700 {
				t.Fatalf("a garbled record of the tail, yet replay starts at %d, after the key fell back", obs.res.From[EventsTopic])
			}
			if dups := h.check(c); dups != 0 {
				t.Fatalf("%d predictions repeated", dups)
			}
			// What c wrote is what the log gives back: its claims were not
			// fenced, and it counts the keys it holds.
			fresh, _ := NewWorker(h.cfg, 0)
			if res, err := fresh.Restore(context.Background(), h.store.MemoryStore); err != nil || !res.Verified {
				t.Fatalf("a fresh restore of what c wrote: verified %v, %v (the digest c kept is not the log's)", res.Verified, err)
			}
			if caughtUp := between && resumed; caughtUp && !tc.corrupt && !obs.res.Verified { // a garbled record cannot be verified
				t.Fatal("the catch-up did not verify its state against the last marker's digest")
			}
			if got, want := logStates(t, c.w), logStates(t, fresh); !maps.EqualFunc(got, want, bytes.Equal) || c.w.Keys() != fresh.Keys() {
				t.Fatalf("the store restores %d keys, %d of them as c holds them; c counts %d keys", len(want), equalStates(got, want), c.w.Keys())
			}
			if tc.cacheKeys == 0 {
				return
			}
			// a's store: in use by c when resumed, else closed by c; c's own:
			// closed when unused, else c's kept state holds it.
			ka, kc := h.keyStores[0], h.keyStores[len(h.keyStores)-1]
			if ka.isClosed() == resumed || kc.isClosed() != resumed {
				t.Fatalf("resumed %v: first runner's key store closed %v, last runner's %v", resumed, ka.isClosed(), kc.isClosed())
			}
			if c.Kept() == nil || c.Kept().Close() != nil || !map[bool]*testKeys{true: ka, false: kc}[resumed].isClosed() {
				t.Fatal("Kept.Close did not close the kept state's key store")
			}
		})
	}
}

// equalStates counts the keys of want that got holds with the same state.
func equalStates(got, want map[string][]byte) int {
	n := 0
	for k, b := range want {
		if bytes.Equal(got[k], b) {
			n++
		}
	}
	return n
}

// blockingSink holds every write until released, counting the writes that
// started.
type blockingSink struct {
	testSink
	release chan struct{}
	started atomic.Int64
}

func (s *blockingSink) Write(ctx context.Context, outs []Output) error {
	s.started.Add(1)
	<-s.release
	return s.testSink.Write(ctx, outs)
}

// heldRun is a Runner over a 1,200-record harness whose sink or store holds
// a write: it runs until the loop has processed through offset want, checks
// that it stays there (the write-behind full), and returns release, which
// closes held to let the write go, waits for the run to finish and checks
// that everything was written in order — no prediction missing or repeated,
// one checkpoint per interval.
func heldRun(t *testing.T, h *harness, sink Sink, store checkpoint.Store, want int64) (release func(held chan struct{})) {
	t.Helper()
	obs := &progress{}
	r, err := NewRunner(RunnerConfig{Partition: 0, Pipeline: h.cfg, Store: store, Open: h.feed.opener(newGate(1 << 62)), Sink: sink,
		Committer: h.com, CheckpointEvery: h.every, CheckpointPeriod: time.Hour, Hooks: []Hook{obs}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	eventually(t, "the loop to run ahead of the held write", func() bool { return obs.last.Load() >= want })
	time.Sleep(50 * time.Millisecond) // room to run further, if nothing held it back
	if got := obs.last.Load(); got != want {
		t.Fatalf("processed through offset %d while a write was held; want %d (the write-behind full)", got, want)
	}
	return func(held chan struct{}) {
		t.Helper()
		close(held)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if dups := h.check(r); dups != 0 {
			t.Fatalf("%d duplicate predictions", dups)
		}
		if c := obs.checkpoints.Load(); c != int64(len(h.feed.recs)/h.every) {
			t.Fatalf("%d checkpoints, want %d", c, len(h.feed.recs)/h.every)
		}
	}
}

// The partition loop does not wait for the broker: while the first
// checkpoint's outputs are stuck in the sink, it goes on processing, until
// the write-behind is writeBehindDepth checkpoints behind (backpressure
// bounds what it holds). Once the sink answers, everything is written in
// order: no prediction missing or repeated, states identical.
func TestSlowSinkDoesNotStallTheLoop(t *testing.T) {
	h := newHarness(t, 1200, 9, true)
	sink := &blockingSink{testSink: testSink{out: h.out}, release: make(chan struct{})}
	// One job in the sink, writeBehindDepth queued, and the loop waiting to
	// hand over the next, taken after the record at this offset.
	release := heldRun(t, h, sink, h.store, int64((writeBehindDepth+2)*h.every-1))
	if n := sink.started.Load(); n != 1 {
		t.Fatalf("%d writes started, want 1 (the first is still held)", n)
	}
	release(sink.release)
}

// heldStore holds its first checkpoint write until release is closed.
type heldStore struct {
	*testStore
	release chan struct{}
	started atomic.Int64
}

func (s *heldStore) WriteAt(ctx context.Context, keys []KeyRecordAlias, m checkpoint.Marker) (int64, error) {
	if s.started.Add(1) == 1 {
		<-s.release
	}
	return s.testStore.WriteAt(ctx, keys, m)
}

// Outputs do not wait behind a checkpoint's key records: while the first
// checkpoint's write is held in the store, the next interval's outputs are
// written — and no more, so that a crash repeats at most two intervals —
// no marker is written, and the loop runs on until the write-behind is
// full. Once the store answers, everything is written in order.
func TestSlowStoreDoesNotHoldOutputs(t *testing.T) {
	h := newHarness(t, 1200, 9, true)
	store := &heldStore{testStore: h.store, release: make(chan struct{})}
	// Checkpoint 1 in the store, checkpoint 2's outputs written and the job
	// waiting for the store, writeBehindDepth jobs queued, and the loop
	// waiting to hand over the next, taken after the record at this offset.
	release := heldRun(t, h, &testSink{out: h.out}, store, int64((writeBehindDepth+3)*h.every-1))
	h.out.mu.Lock()
	written := len(h.out.preds)
	h.out.mu.Unlock()
	ref, err := NewWorker(h.cfg, 0) // the predictions of the first two intervals
	if err != nil {
		t.Fatal(err)
	}
	run(t, ref, h.feed.recs[:2*h.every])
	if want := int(ref.Totals().Predictions); written != want {
		t.Fatalf("%d predictions written while the first checkpoint was held; want %d (its own interval's and the next's)", written, want)
	}
	if snap, _ := h.store.Load(context.Background(), 0, nil); snap.Marker != nil {
		t.Fatalf("marker %+v written while the first checkpoint was held", snap.Marker)
	}
	if n := store.started.Load(); n != 1 {
		t.Fatalf("%d checkpoint writes started, want 1", n)
	}
	release(store.release)
}

// A change made through Do is acknowledged only once its checkpoint is
// written: when the write-behind fails to write it, Do gets the partition's
// error, the partition ends with it, and nothing of the checkpoint — no
// output, no marker — was written.
func TestDoGetsTheWriteBehindsFailure(t *testing.T) {
	h := newHarness(t, 200, 5, false)
	sink := &testSink{out: h.out}
	sink.before.set(&fault{times: -1}) // every write fails for good
	obs := &progress{}
	r := h.runner(1, newGate(10), sink, obs) // 10 records, fewer than a checkpoint interval
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	eventually(t, "the first records", func() bool { return obs.last.Load() == 9 })
	err := r.Do(context.Background(), func(*Worker) bool { return true })
	var pe *PartitionError
	if !errors.As(err, &pe) || pe.Step != StepSink {
		t.Fatalf("Do = %v, want the sink's partition error", err)
	}
	if err := <-done; !errors.As(err, &pe) || pe.Step != StepSink {
		t.Fatalf("Run = %v, want the sink's partition error", err)
	}
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	if len(h.out.preds) != 0 {
		t.Fatalf("%d predictions written", len(h.out.preds))
	}
	if snap, _ := h.store.Load(context.Background(), 0, nil); snap.Marker != nil {
		t.Fatal("a marker was written after its outputs failed")
	}
	if n := obs.checkpoints.Load(); n != 0 {
		t.Fatalf("%d checkpoints reported", n)
	}
}

// stoppedAtCrash waits for a runner's Run, stopped by an injected crash,
// to return without error.
func stoppedAtCrash(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the runner did not stop at the crash")
	}
}

// beforeSixthCheckpoint runs a first runner (generation 1) until it has
// written 5 checkpoints and processed all but the last record of the 6th
// interval, held at its gate g: the next record (g.upto = crashAt) triggers
// the 6th checkpoint, where a test injects its crash. done gets Run's result.
func (h *harness) beforeSixthCheckpoint() (crashAt int, sink *testSink, g *gate, done <-chan error) {
	h.t.Helper()
	crashAt = 6 * h.every
	sink = &testSink{out: h.out}
	obs := &progress{}
	g = newGate(int64(crashAt - 1))
	r := h.runner(1, g, sink, obs)
	ch := make(chan error, 1)
	go func() { ch <- r.Run(context.Background()) }()
	eventually(h.t, "the first runner's progress and 5 checkpoints written", func() bool {
		return obs.last.Load() == int64(crashAt-2) && obs.checkpoints.Load() == 5
	})
	return crashAt, sink, g, ch
}
