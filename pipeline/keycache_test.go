package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keystore"
)

// errInjected is a key store failure injected by testKeys.
var errInjected = errors.New("injected key store failure")

// testKeys wraps a Pebble key store: it lists the keys stored, counts the
// reads, and fails the operations armed in fail.
type testKeys struct {
	KeyStore
	mu     sync.Mutex
	stored map[string]bool
	gets   int
	fail   map[string]int // operation → fail its n-th next call
	closed bool
	// hang, when set, blocks Close until it is closed: a store on a hung disk.
	hang chan struct{}
}

// newTestKeys opens a Pebble key store in a directory of its own.
func newTestKeys(t *testing.T) *testKeys {
	t.Helper()
	s, err := keystore.Open(filepath.Join(t.TempDir(), "keys"), testKeyOptions)
	if err != nil {
		t.Fatal(err)
	}
	return wrapTestKeys(t, s)
}

// testKeyOptions size the tests' Pebble stores small.
var testKeyOptions = keystore.Options{CacheBytes: 1 << 20, MemTableBytes: 1 << 20}

// wrapTestKeys wraps s for counting and fault injection, closing it at the
// end of the test unless the test closed it.
func wrapTestKeys(t *testing.T, s *keystore.Store) *testKeys {
	k := &testKeys{KeyStore: s, stored: map[string]bool{}, fail: map[string]int{}}
	t.Cleanup(func() {
		if !k.isClosed() {
			s.Close()
		}
	})
	return k
}

// arm fails operation op on its n-th next call.
func (s *testKeys) arm(op string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[op] = n
}

func (s *testKeys) hit(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.fail[op]
	if !ok {
		return nil
	}
	if n > 1 {
		s.fail[op] = n - 1
		return nil
	}
	delete(s.fail, op)
	return fmt.Errorf("%s: %w", op, errInjected)
}

func (s *testKeys) Get(key string) ([]byte, bool, error) {
	if err := s.hit("get"); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	s.gets++
	s.mu.Unlock()
	return s.KeyStore.Get(key)
}

func (s *testKeys) Set(key string, record []byte) error {
	if err := s.hit("set"); err != nil {
		return err
	}
	s.mu.Lock()
	s.stored[key] = true
	s.mu.Unlock()
	return s.KeyStore.Set(key, record)
}

func (s *testKeys) Delete(key string) error {
	if err := s.hit("delete"); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.stored, key)
	s.mu.Unlock()
	return s.KeyStore.Delete(key)
}

func (s *testKeys) Flush() error {
	if err := s.hit("flush"); err != nil {
		return err
	}
	return s.KeyStore.Flush()
}

func (s *testKeys) Reset() error {
	if err := s.hit("reset"); err != nil {
		return err
	}
	s.mu.Lock()
	clear(s.stored)
	s.mu.Unlock()
	return s.KeyStore.Reset()
}

func (s *testKeys) Close() error {
	s.mu.Lock()
	s.closed = true
	hang := s.hang
	s.mu.Unlock()
	if hang != nil {
		<-hang
	}
	return s.KeyStore.Close()
}

func (s *testKeys) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *testKeys) reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

// names lists the keys stored.
func (s *testKeys) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.stored {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// cachedWorker is a worker that holds at most cacheKeys keys in memory
// after a checkpoint, the others in a Pebble key store.
func cachedWorker(t *testing.T, cfg Config, cacheKeys int) (*Worker, *testKeys) {
	t.Helper()
	w, err := NewWorker(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	ks := newTestKeys(t)
	if err := w.UseKeyStore(ks, cacheKeys); err != nil {
		t.Fatal(err)
	}
	return w, ks
}

// With a key store and a cache far smaller than the partition's keys, a
// run with crashes and restores ends with the states of one uninterrupted
// run without a store, every event predicted once, and never more clean
// keys in memory after a checkpoint than the cache holds.
func TestKeyCacheIsBitIdentical(t *testing.T) {
	for _, c := range []struct {
		learner, params string
		cacheKeys       int
	}{
		{"lasec-ss", `{"a":0.3}`, 1},
		{"lasec-ss", `{"a":0.3}`, 5},
		{"budget-perceptron", `{"budget":20}`, 2},
		{"dynamic-odm", "", 3},
	} {
		t.Run(fmt.Sprintf("%s/cache-%d", c.learner, c.cacheKeys), func(t *testing.T) {
			cfg := testConfig(t, c.learner, c.params)
			recs := records(3, 3000, 12)
			ref, _ := NewWorker(cfg, 0)
			run(t, ref, recs)
			var stores []*testKeys
			newWorker := func() *Worker {
				w, ks := cachedWorker(t, cfg, c.cacheKeys)
				stores = append(stores, ks)
				return w
			}
			over, checkpoints := 0, 0
			w := crashing(t, recs, newWorker, func(w *Worker) {
				checkpoints++
				if w.Resident() > c.cacheKeys {
					over++
				}
				if w.Keys() < w.Resident() {
					t.Fatalf("%d keys held, %d of them in memory", w.Keys(), w.Resident())
				}
			})
			if over != 0 {
				t.Errorf("%d of %d checkpoints left more than %d keys in memory", over, checkpoints, c.cacheKeys)
			}
			reads := 0
			for _, s := range stores {
				reads += s.reads()
			}
			if reads == 0 {
				t.Error("no key was read back from the key store")
			}
			if w.Keys() != ref.Keys() {
				t.Errorf("Keys() = %d, want %d", w.Keys(), ref.Keys())
			}
			sameStates(t, w, ref)
		})
	}
}

// The cache evicts the keys a checkpoint did not write before those it did,
// and of those, first the ones whose record in the store is current.
func TestKeyCacheEvictsUntouchedKeysFirst(t *testing.T) {
	cfg := testConfig(t, "perceptron", "")
	w, keys := cachedWorker(t, cfg, 2)
	ctx := context.Background()
	offset := int64(0)
	touch := func(keys ...string) {
		for _, k := range keys {
			if err := w.Process(ctx, Record{Offset: offset, Key: []byte(k), Value: []byte(fmt.Sprintf(`{"id":"e%d","x":[1,0,0,1],"label":1}`, offset))}); err != nil {
				t.Fatal(err)
			}
			offset++
		}
		if _, err := w.TakeCheckpoint(); err != nil {
			t.Fatal(err)
		}
	}
	touch("a", "b")
	touch("c", "d")
	if got := slices.Sorted(maps.Keys(w.keys)); !slices.Equal(got, []string{"c", "d"}) || w.Keys() != 4 {
		t.Fatalf("in memory %v of %d keys, want [c d] of 4", got, w.Keys())
	}
	// a, read back unchanged, is evicted before d, which the store has no
	// record of: evicting it costs no write.
	sets := len(keys.names())
	if _, ok, err := w.Inspect("a"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	touch("c")
	if got := slices.Sorted(maps.Keys(w.keys)); !slices.Equal(got, []string{"c", "d"}) || len(keys.names()) != sets {
		t.Fatalf("in memory %v, %d keys in the store; want [c d], %d", got, len(keys.names()), sets)
	}
}

// fed runs recs through w, checkpointing into store every 100 records.
func fed(t *testing.T, w *Worker, recs []Record, store checkpoint.Store) {
	t.Helper()
	for i, r := range recs {
		if err := w.Process(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			if _, _, err := w.Checkpoint(context.Background(), store); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// sameBatch fails t unless two checkpoints hold the same records.
func sameBatch(t *testing.T, got, want CheckpointBatch) {
	t.Helper()
	differing, empty := 0, 0
	for i := range min(len(got.Keys), len(want.Keys)) {
		g, w := got.Keys[i], want.Keys[i]
		if g.Key != w.Key || g.AppliedThrough != w.AppliedThrough || !bytes.Equal(g.State, w.State) {
			differing++
		}
		if len(g.State) == 0 {
			empty++
		}
	}
	if len(got.Keys) != len(want.Keys) || differing != 0 || empty != 0 || !reflect.DeepEqual(got.Marker, want.Marker) {
		t.Fatalf("checkpoint of %d records (%d differing, %d empty), marker %+v; want %d records, marker %+v",
			len(got.Keys), differing, empty, got.Marker, len(want.Keys), want.Marker)
	}
}

// Each failure of the key store is an error of the step that met it, and
// leaves the worker as it was: retried, the step gives what a worker
// without a key store gives, and the run ends with its states.
func TestKeyStoreFailuresLeaveTheWorkerConsistent(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, "lasec-ss", `{"a":0.3}`)
	recs := records(5, 1500, 10)
	head, tail := recs[:1000], recs[1000:] // the last checkpoint at the end of head
	for _, tc := range []struct {
		name string
		op   string // the key store operation that fails
		step string // the worker's step it fails
	}{
		{"read while processing", "get", "process"},
		{"write at a checkpoint", "set", "checkpoint"},
		{"commit at a checkpoint", "flush", "checkpoint"},
		{"reset before a restore", "reset", "restore"},
		{"write during a restore", "set", "restore"},
		{"commit after a restore", "flush", "restore"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, _ := NewWorker(cfg, 0)
			fed(t, ref, head, checkpoint.NewMemoryStore())
			store := checkpoint.NewMemoryStore()
			w, keys := cachedWorker(t, cfg, 1)
			fed(t, w, head, store)
			switch tc.step {
			case "process":
				w.TakeOutputs() // head's, compared below with the tail's
				keys.arm(tc.op, 1)
				failed := 0
				for _, r := range tail {
					before, resident, outs := w.Totals(), w.Resident(), len(w.out)
					err := w.Process(ctx, r)
					if err != nil {
						failed++
						if !errors.Is(err, errInjected) || w.Totals() != before || len(w.out) != outs || w.Resident() != resident {
							t.Fatalf("failed Process: %v; totals changed %v, %d → %d outputs, %d → %d keys in memory", err, w.Totals() != before, outs, len(w.out), resident, w.Resident())
						}
						err = w.Process(ctx, r) // retried
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				ref.TakeOutputs()
				want := run(t, ref, tail)
				if failed != 1 {
					t.Fatalf("%d records failed, want 1", failed)
				}
				sameOutputs(t, w.TakeOutputs(), want)
			case "checkpoint":
				run(t, ref, tail)
				run(t, w, tail)
				resident := w.Resident()
				keys.arm(tc.op, 1)
				if _, err := w.TakeCheckpoint(); !errors.Is(err, errInjected) || w.Resident() != resident {
					t.Fatalf("TakeCheckpoint = %v; %d → %d keys in memory", err, resident, w.Resident())
				}
				got, err := w.TakeCheckpoint()
				if err != nil {
					t.Fatal(err)
				}
				want, _ := ref.TakeCheckpoint()
				sameBatch(t, got, want)
			case "restore":
				r, keys := cachedWorker(t, cfg, 1)
				keys.arm(tc.op, 1)
				if _, err := r.Restore(ctx, store); !errors.Is(err, errInjected) || r.Keys() != 0 || r.Resident() != 0 {
					t.Fatalf("Restore = %v, leaving %d keys (%d in memory)", err, r.Keys(), r.Resident())
				}
				res, err := r.Restore(ctx, store)
				if err != nil || r.Keys() != ref.Keys() {
					t.Fatalf("Restore again = %v, %d keys; want %d", err, r.Keys(), ref.Keys())
				}
				w = r
				run(t, ref, recs[res.From[EventsTopic]:])
				run(t, w, recs[res.From[EventsTopic]:])
			}
			sameStates(t, w, ref)
		})
	}
}

// sameOutputs fails t unless two runs emitted the same outputs.
func sameOutputs(t *testing.T, got, want []Output) {
	t.Helper()
	differing := 0
	for i := range min(len(got), len(want)) {
		if got[i].Kind != want[i].Kind || !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) {
			differing++
		}
	}
	if len(got) != len(want) || differing != 0 {
		t.Fatalf("%d outputs, %d of them differing; want %d", len(got), differing, len(want))
	}
}

// A record in the key store that does not decode fails the record that
// needs it, naming the key; a restore rebuilds the store from the
// changelog and the run ends as one without a key store.
func TestCorruptKeyStoreRecordFailsTheRecord(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, "perceptron", "")
	recs := records(6, 1200, 10)
	ref, _ := NewWorker(cfg, 0)
	run(t, ref, recs)
	store := checkpoint.NewMemoryStore()
	w, keys := cachedWorker(t, cfg, 1)
	fed(t, w, recs[:1000], store)
	victim := ""
	for _, k := range keys.names() {
		if _, ok := w.keys[k]; !ok {
			victim = k
			break
		}
	}
	if err := keys.KeyStore.Set(victim, []byte("\x02Kgarbage")); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, r := range recs[1000:] {
		err := w.Process(ctx, r)
		if err == nil {
			continue
		}
		failed++
		if string(r.Key) != victim || !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("key %q from the key store", victim)) {
			t.Fatalf("record of key %s: %v", r.Key, err)
		}
		break
	}
	if failed != 1 {
		t.Fatalf("%d records failed, want 1", failed)
	}
	r, _ := cachedWorker(t, cfg, 1)
	res, err := r.Restore(ctx, store)
	if err != nil || len(res.Problems) != 0 {
		t.Fatal(err, res.Problems)
	}
	run(t, r, recs[res.From[EventsTopic]:])
	sameStates(t, r, ref)
}

// A changelog write that fails after its checkpoint evicted keys leaves
// them dirty; the next checkpoint reads them back from the key store and
// writes what a worker without one writes.
func TestRefusedChangelogWriteAfterEviction(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, "lasec-ss", `{"a":0.3}`)
	recs := records(7, 800, 10)
	ref, _ := NewWorker(cfg, 0)
	w, _ := cachedWorker(t, cfg, 1)
	for _, x := range []*Worker{ref, w} {
		run(t, x, recs)
		refusing := &refusingStore{MemoryStore: checkpoint.NewMemoryStore(), refuse: true}
		if _, _, err := x.Checkpoint(ctx, refusing); err == nil {
			t.Fatal("refused write: no error")
		}
	}
	if w.Resident() != 1 {
		t.Fatalf("%d keys in memory after the checkpoint, want 1", w.Resident())
	}
	got, err := w.TakeCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ref.TakeCheckpoint()
	sameBatch(t, got, want)
}

// Park parks the wrapped Pebble store, unless "park" is armed.
func (s *testKeys) Park(dir string, manifest []byte) error {
	if err := s.hit("park"); err != nil {
		s.Close()
		return err
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return s.KeyStore.(*keystore.Store).Park(dir, manifest)
}

// A key store on a hung disk: its flush fails the partition, and closing it
// then never returns. Run still returns the failure (so that the service
// publishes it), after CloseTimeout, not when the disk wakes.
func TestRunnerFailsWithAHungKeyStore(t *testing.T) {
	h := newHarness(t, 400, 30, true)
	h.cacheKeys = 5
	r := h.runner(1, newGate(1<<62), nil, nil)
	ks := h.keyStores[0]
	hang := make(chan struct{})
	defer close(hang)
	ks.mu.Lock()
	ks.hang = hang
	ks.mu.Unlock()
	ks.arm("flush", 1)
	r.cfg.CloseTimeout = 200 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	select {
	case err := <-done:
		var pe *PartitionError
		if !errors.As(err, &pe) || !errors.Is(err, errInjected) {
			t.Fatalf("Run returned %v, want the key store's failure", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run waits for a key store that never closes")
	}
}
