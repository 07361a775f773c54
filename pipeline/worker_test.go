package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

const dim = 4

func testConfig(t testing.TB, learner, params string) Config {
	t.Helper()
	vec, err := topics.NewVectorizer(dim, 0)
	if err != nil {
		t.Fatal(err)
	}
	return Config{Settings: keyed.Settings{Learner: learner, Params: json.RawMessage(params), Seed: 7, Vector: vec, QueryScale: 1, MaxPending: 50, PendingTTL: 400}}
}

// records builds a partition's input: events for nkeys keys with drifting
// targets; a third are unlabeled and get a label record a few records later.
func records(seed uint64, n, nkeys int) []Record { return keyedRecords(seed, n, nkeys, false) }

// keyedRecords is records, or with apart set a stream whose keys share
// nothing: each key's labels follow a concept of its own, drawn at its
// first event and changed, as the shared one is, every 300 events.
func keyedRecords(seed uint64, n, nkeys int, apart bool) []Record {
	r := rand.New(rand.NewPCG(seed, 9))
	u := []float64{1, -1, 0.5, 0}
	own := map[string][]float64{}
	var out []Record
	type late struct {
		at      int
		key, id string
		label   int
	}
	var lates []late
	for i := 0; len(out) < n; i++ {
		if i%300 == 0 {
			for j := range u {
				u[j] = r.NormFloat64()
			}
			clear(own)
		}
		for len(lates) > 0 && lates[0].at <= len(out) {
			l := lates[0]
			lates = lates[1:]
			out = append(out, Record{Offset: int64(len(out)), Key: []byte(l.key), Value: []byte(fmt.Sprintf(`{"id":%q,"label":%d}`, l.id, l.label))})
		}
		x := make([]float64, dim)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		key := fmt.Sprintf("k%d", r.IntN(nkeys))
		c := u
		if apart {
			if own[key] == nil {
				own[key] = []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
			}
			c = own[key]
		}
		m := 0.0
		for j := range x {
			m += c[j] * x[j]
		}
		y := 1
		if m < 0 {
			y = -1
		}
		id := fmt.Sprintf("e%d", i)
		xs, _ := json.Marshal(x)
		if r.IntN(3) == 0 {
			out = append(out, Record{Offset: int64(len(out)), Key: []byte(key), Value: []byte(fmt.Sprintf(`{"id":%q,"x":%s}`, id, xs))})
			lates = append(lates, late{at: len(out) + 1 + r.IntN(20), key: key, id: id, label: y})
		} else {
			out = append(out, Record{Offset: int64(len(out)), Key: []byte(key), Value: []byte(fmt.Sprintf(`{"id":%q,"x":%s,"label":%d}`, id, xs, y))})
		}
	}
	return out
}

func run(t *testing.T, w *Worker, recs []Record) []Output {
	t.Helper()
	for _, r := range recs {
		if err := w.Process(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return w.TakeOutputs()
}

// restarted checkpoints w, which processed seen (events-topic records,
// offsets from 0), into a fresh memory store and returns a new worker of
// the same configuration restored from it and replayed from where the
// restore says (the stretch re-read for awaited inputs): a restart.
func restarted(t *testing.T, w *Worker, seen []Record) *Worker {
	t.Helper()
	store := checkpoint.NewMemoryStore()
	if _, _, err := w.Checkpoint(context.Background(), store); err != nil {
		t.Fatal(err)
	}
	r, err := NewWorker(w.cfg, w.partition)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Restore(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range seen {
		if rec.Offset >= res.From[EventsTopic] {
			if err := r.Process(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	if outs := r.TakeOutputs(); len(outs) != 0 {
		t.Fatalf("the replay of records every key absorbed wrote %d outputs", len(outs))
	}
	return r
}

// states returns every key's encoded state, with a key store (a *testKeys)
// its keys too.
func states(t *testing.T, w *Worker) map[string][]byte {
	t.Helper()
	return encodedStates(t, w, (*keyed.State).MarshalBinary)
}

// logStates is states in the changelog's encoding, which leaves out the
// awaited inputs the events topic gives back: what a restore reads before
// its replay re-reads them.
func logStates(t *testing.T, w *Worker) map[string][]byte {
	t.Helper()
	return encodedStates(t, w, (*keyed.State).MarshalChangelog)
}

// encodedStates is every key of w, encoded by enc.
func encodedStates(t *testing.T, w *Worker, enc func(*keyed.State) ([]byte, error)) map[string][]byte {
	t.Helper()
	names := slices.Collect(maps.Keys(w.keys))
	if w.cache != nil {
		names = append(names, w.cache.store.(*testKeys).names()...)
	}
	out := map[string][]byte{}
	for _, k := range names {
		ks, ok, err := w.lookup(k)
		if !ok || err != nil {
			t.Fatalf("key %q: held %v, %v", k, ok, err)
		}
		b, err := enc(ks)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = b
	}
	return out
}

// Several features over the input bound: the dead letter's reason names
// the first by name, every time, so that a replay writes the same record.
func TestOverBoundFeaturesGiveTheSameReason(t *testing.T) {
	ev := topics.Event{Features: map[string]float64{"zeta": 1e200, "omega": -1e200, "alpha": 1e200, "mu": 1e200, "beta": 1}}
	for range 30 {
		err := checkRange(ev, 1e150)
		if err == nil || !strings.Contains(err.Error(), `feature "alpha" = 1e+200`) || !strings.Contains(err.Error(), "(4 features over it)") || !errors.Is(err, topics.ErrInvalid) {
			t.Fatalf("err = %v", err)
		}
	}
}

func TestEveryEventOnePredictionAndBadInputsDeadLetter(t *testing.T) {
	w, err := NewWorker(testConfig(t, "lasec", ""), 0)
	if err != nil {
		t.Fatal(err)
	}
	recs := records(1, 500, 5)
	bad := []struct{ key, value, class, frag string }{
		{"k1", `{"id":"b1","x":[1,2`, "invalid_event", "malformed JSON"},
		{"k1", `{"id":"b2","x":[1,2,3]}`, "rejected_by_learner", "3 entries"},
		{"", `{"id":"b3","x":[1,2,3,4]}`, "missing_key", "no key"},
		{"k2", `{"id":"b4","x":[1,2,3,4],"lable":1}`, "invalid_event", "lable"},
		{"k2", `{"id":"b5","features":{"a":1}}`, "rejected_by_learner", "hash bits"},
		{"k3", `{"id":"b6","x":[1,2,3,4],"label":7}`, "invalid_event", "label"},
		{"k3", strings.Repeat(" ", topics.DefaultMaxBytes+1), "invalid_event", "exceeds the limit"},
		{"k4", `{"id":"b8","x":[1e155,0,0,0],"label":1}`, "invalid_event", "exceeds the input bound"},
		{"\x00driftstream-marker-0", `{"id":"b9","x":[1,2,3,4]}`, "invalid_event", "is reserved (the checkpoint store's prefix"},
	}
	var all []Record
	for i, r := range recs {
		all = append(all, r)
		if i%60 == 0 && i/60 < len(bad) {
			b := bad[i/60]
			all = append(all, Record{Key: []byte(b.key), Value: []byte(b.value)})
		}
	}
	for i := range all {
		all[i].Offset = int64(i)
	}
	outs := run(t, w, all)
	preds := map[string]int{}
	var dead []Output
	for _, o := range outs {
		switch o.Kind {
		case OutPrediction:
			var m topics.Prediction
			json.Unmarshal(o.Value, &m)
			preds[m.ID]++
		case OutDeadLetter:
			dead = append(dead, o)
		}
	}
	events := 0
	for _, r := range recs {
		if ev, _ := topics.Decode(r.Value, 0); ev.Kind == topics.Input {
			events++
			if preds[ev.ID] != 1 {
				t.Fatalf("event %s got %d predictions", ev.ID, preds[ev.ID])
			}
		}
	}
	if len(preds) != events {
		t.Fatalf("%d predictions for %d events", len(preds), events)
	}
	if len(dead) != len(bad) {
		t.Fatalf("%d dead letters, want %d", len(dead), len(bad))
	}
	for i, d := range dead {
		want := []byte(bad[i].value)
		if len(want) > MaxDeadLetterBytes { // an oversized record's copy is cut, and says so
			want = want[:MaxDeadLetterBytes]
			if d.Headers["truncated"] == "" {
				t.Errorf("dead letter %d: cut without a truncated header", i)
			}
		}
		if !strings.Contains(d.Headers["error"], bad[i].frag) || d.Headers["source-topic"] != "events" || d.Headers["offset"] == "" || !bytes.Equal(d.Value, want) {
			t.Errorf("dead letter %d: %v", i, d.Headers)
		}
	}
	st := w.Totals()
	if st.InvalidEvent != 6 || st.Rejected != 2 || st.MissingKey != 1 || st.DeadLetters != 9 {
		t.Fatalf("dead letter classes %v", st.DeadLetters)
	}
}

// Every unlabeled event awaits its label, queried or not: each label record
// joins its event and scores it (and trains the learner, unless it is a
// sampler that did not ask).
func TestQueryLabelLearnLoop(t *testing.T) {
	for _, c := range []struct{ learner, params string }{{"lasec-ss", `{"a":0.5}`}, {"perceptron", ""}} {
		w, _ := NewWorker(testConfig(t, c.learner, c.params), 0)
		recs := records(2, 2000, 3)
		labelRecords := 0
		for _, r := range recs {
			if !bytes.Contains(r.Value, []byte(`"x"`)) {
				labelRecords++
			}
		}
		outs := run(t, w, recs)
		queries := 0
		for _, o := range outs {
			if o.Kind == OutQuery {
				queries++
			}
		}
		st := w.Totals()
		if queries == 0 || st.LabelsJoined != int64(labelRecords) || st.DelayedLabeled != st.LabelsJoined || st.LabelsUnknown != 0 {
			t.Fatalf("%s: %d queries, %d label records, stats %+v", c.learner, queries, labelRecords, st)
		}
	}
}

// Crash at random points: a new worker restores the last checkpoint, replays
// from where it says, and ends bit-identical to an uninterrupted run; with
// outputs suppressed below the committed offset, every event is predicted
// exactly once.
func TestCrashRestoreIsBitIdentical(t *testing.T) {
	for _, c := range []struct{ learner, params string }{{"lasec-ss", `{"a":0.3}`}, {"budget-perceptron", `{"budget":20}`}, {"dynamic-odm", ""}} {
		t.Run(c.learner, func(t *testing.T) {
			cfg := testConfig(t, c.learner, c.params)
			recs := records(3, 3000, 12)
			ref, _ := NewWorker(cfg, 0)
			run(t, ref, recs)
			newWorker := func() *Worker { w, _ := NewWorker(cfg, 0); return w }
			w := crashing(t, recs, newWorker, nil)
			sameStates(t, w, ref)
		})
	}
}

// dirtyStatesHeld fails t unless every dirty key listed with its state is
// held as that state: the checkpoint writes the state it was listed with
// (dirtyKey).
func dirtyStatesHeld(t *testing.T, w *Worker) {
	t.Helper()
	for i, dk := range w.dirty {
		if dk.state != nil && w.keys[dk.key] != dk.state {
			t.Fatalf("dirty key %q listed with a state the worker does not hold as it", dk.key)
		}
		if dk.state != nil && (!dk.state.Mark.Dirty || dk.state.Mark.Slot != int32(i)) {
			t.Fatalf("dirty key %q listed %d-th, its state's mark %+v", dk.key, i, dk.state.Mark)
		}
	}
}

// crashing runs recs through workers from newWorker that checkpoint every
// 97 records into a file store and crash every 50 to 450 records, each
// crash followed by a restore into a fresh worker. It fails t unless every
// event is predicted exactly once (outputs below the committed offsets are
// suppressed), and returns the last worker. checkpointed, when set, is
// called after each checkpoint.
func crashing(t *testing.T, recs []Record, newWorker func() *Worker, checkpointed func(*Worker)) *Worker {
	t.Helper()
	store, _ := checkpoint.NewFileStore(t.TempDir(), 0)
	r := rand.New(rand.NewPCG(5, 5))
	w := newWorker()
	preds := map[string]int{}
	pos, committed := 0, int64(0)
	count := countPredictions(preds)
	for pos < len(recs) {
		stop := min(len(recs), pos+50+r.IntN(400))
		for ; pos < stop; pos++ {
			if err := w.Process(context.Background(), recs[pos]); err != nil {
				t.Fatal(err)
			}
			if pos%97 == 0 { // checkpoint: flush outputs, write, commit
				dirtyStatesHeld(t, w)
				count(w.TakeOutputs())
				if _, _, err := w.Checkpoint(context.Background(), store); err != nil {
					t.Fatal(err)
				}
				committed = int64(pos) + 1
				if checkpointed != nil {
					checkpointed(w)
				}
			}
		}
		if pos == len(recs) {
			count(w.TakeOutputs())
			break
		}
		// Crash: outputs since the last checkpoint may or may not have been
		// delivered; drop them (the at-least-once case would deliver them).
		w.TakeOutputs()
		w = newWorker()
		res, err := w.Restore(context.Background(), store)
		if err != nil || len(res.Problems) > 0 {
			t.Fatal(err, res.Problems)
		}
		w.SuppressBelow([2]int64{committed, committed})
		pos = int(res.From[EventsTopic])
	}
	for _, rec := range recs {
		if ev, _ := topics.Decode(rec.Value, 0); ev.Kind == topics.Input && preds[ev.ID] != 1 {
			t.Fatalf("event %s predicted %d times", ev.ID, preds[ev.ID])
		}
	}
	return w
}

// countPredictions returns a function that counts outputs' predictions
// into preds, by event id.
func countPredictions(preds map[string]int) func([]Output) {
	return func(outs []Output) {
		for _, o := range outs {
			if o.Kind == OutPrediction {
				var m topics.Prediction
				json.Unmarshal(o.Value, &m)
				preds[m.ID]++
			}
		}
	}
}

// sameStates fails t unless got and want hold the same keys with
// byte-identical states.
func sameStates(t *testing.T, got, want *Worker) {
	t.Helper()
	g, w := states(t, got), states(t, want)
	differing := 0
	for k, b := range w {
		if !bytes.Equal(g[k], b) {
			differing++
		}
	}
	if len(g) != len(w) || differing != 0 {
		t.Fatalf("%d keys, want %d; %d differ from the uninterrupted run", len(g), len(w), differing)
	}
}

// A corrupted checkpoint record is reported, and replay from further back
// still ends bit-identical. With a population model the key would replay
// beside a shared part ahead of it: the restore refuses
// (ErrInexactRestore), and the Runner rebuilds the partition from its
// inputs (TestInexactRestoreRebuildsFromTheInputs).
func TestCorruptCheckpointRecoversByReplay(t *testing.T) {
	for _, population := range []string{keyed.PopulationOff, "lasec"} {
		t.Run("population-"+population, func(t *testing.T) { corruptCheckpointRecovers(t, population) })
	}
}

func corruptCheckpointRecovers(t *testing.T, population string) {
	cfg := testConfig(t, "lasec", "")
	cfg.Population = population
	recs := records(4, 1500, 6)
	ref, _ := NewWorker(cfg, 0)
	run(t, ref, recs)
	want := states(t, ref)

	dir := t.TempDir()
	store, _ := checkpoint.NewFileStore(dir, 0)
	w, _ := NewWorker(cfg, 0)
	run(t, w, recs[:500])
	w.Checkpoint(context.Background(), store)
	run(t, w, recs[500:1000])
	w.Checkpoint(context.Background(), store)

	// Flip a byte in the last key record of the log.
	path := dir + "/partition-0.log"
	b, _ := os.ReadFile(path)
	b[len(b)-49] ^= 0xff // in the last key record, before the marker
	os.WriteFile(path, b, 0o644)

	w2, _ := NewWorker(cfg, 0)
	res, err := w2.Restore(context.Background(), store)
	if population != keyed.PopulationOff {
		if !errors.Is(err, ErrInexactRestore) || w2.Keys() != 0 {
			t.Fatalf("restore with a population model and an unreadable record: %v, %d keys; want ErrInexactRestore and none", err, w2.Keys())
		}
		return
	}
	from := res.From
	if err != nil || len(res.Problems) == 0 {
		t.Fatalf("corruption not reported: %v %v", err, res.Problems)
	}
	if from[EventsTopic] >= 1000 {
		t.Fatalf("replay from %d: must go back before the corrupt record", from[EventsTopic])
	}
	w2.SuppressBelow([2]int64{1000, 1000}) // committed after the second checkpoint
	for _, o := range run(t, w2, recs[from[EventsTopic]:]) {
		var m topics.Prediction
		if o.Kind == OutPrediction && json.Unmarshal(o.Value, &m) == nil && m.Offset < 1000 {
			t.Fatalf("replay re-emitted the prediction of offset %d, delivered before the crash", m.Offset)
		}
	}
	got := states(t, w2)
	var differing []string
	for k, s := range want {
		if !bytes.Equal(got[k], s) {
			differing = append(differing, k)
		}
	}
	if len(differing) > 0 {
		t.Fatalf("keys %q differ after recovery", differing)
	}
	if !slices.Equal(sortedKeys(got), sortedKeys(want)) {
		t.Fatal("key sets differ")
	}
	// The key listed unheld at the restore and again when replay rebuilt
	// it is written once, with the state it has; every other key as held.
	dirtyStatesHeld(t, w2)
	c, err := w2.TakeCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range c.Keys {
		if i > 0 && c.Keys[i-1].Key >= rec.Key {
			t.Fatalf("key records %q then %q: want each key once, in order", c.Keys[i-1].Key, rec.Key)
		}
		held, err := w2.model.AppendChangelog(nil, w2.keys[rec.Key])
		if err != nil || !bytes.Equal(rec.State, held) {
			t.Fatalf("key %q written as %d bytes, held as %d (%v)", rec.Key, len(rec.State), len(held), err)
		}
	}
	if len(c.Keys) != len(got) {
		t.Fatalf("%d key records after the replay, want every one of the %d keys", len(c.Keys), len(got))
	}
}

func sortedKeys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// On a separate labels topic a label may arrive before its event (the two
// topics are read concurrently): it waits in the key's state, survives a
// checkpoint, and labels the event when it comes.
func TestEarlyLabelsFromTheLabelsTopicAreNotLost(t *testing.T) {
	cfg := testConfig(t, "perceptron", "")
	w, _ := NewWorker(cfg, 0)
	ctx := context.Background()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Process(ctx, Record{Topic: LabelsTopic, Offset: 0, Key: []byte("k"), Value: []byte(`{"id":"e1","label":-1}`)}))
	store, _ := checkpoint.NewFileStore(t.TempDir(), 0)
	if _, _, err := w.Checkpoint(ctx, store); err != nil {
		t.Fatal(err)
	}
	w2, _ := NewWorker(cfg, 0)
	if res, err := w2.Restore(ctx, store); err != nil || len(res.Problems) > 0 {
		t.Fatal(err, res.Problems)
	}
	must(w2.Process(ctx, Record{Topic: EventsTopic, Offset: 0, Key: []byte("k"), Value: []byte(`{"id":"e1","x":[1,0,0,0]}`)}))
	st := w2.Totals()
	if st.LabelsJoined != 1 || st.Labeled != 1 || st.LabelsUnknown != 0 {
		t.Fatalf("stats %+v: the early label was lost", st)
	}
	// On the events topic, a label before its event is a producer error: unknown.
	must(w2.Process(ctx, Record{Topic: EventsTopic, Offset: 1, Key: []byte("k"), Value: []byte(`{"id":"e9","label":1}`)}))
	if w2.Totals().LabelsUnknown != 1 {
		t.Fatal("a label before its event on the events topic was not counted unknown")
	}
}

// The numeric guard: with the input bound raised out of the way, a value
// whose update would overflow a second-order learner (x² = 1e320) is
// dead-lettered with the reason, and the key's weights are untouched: later
// events of the key score exactly as if the record had never come.
func TestNumericGuardLeavesStateUntouched(t *testing.T) {
	ctx := context.Background()
	normal := []string{
		`{"id":"a","x":[1,0.5,-1,2],"label":1}`,
		`{"id":"b","x":[-1,0.2,1,0.5],"label":-1}`,
		`{"id":"c","x":[0.3,-2,1,1],"label":1}`,
	}
	probe := `{"id":"probe","x":[1,2,3,4]}`
	run := func(poison bool) (score float64, dead []Output) {
		cfg := testConfig(t, "lasec-ss", `{"a":0.3}`)
		cfg.MaxAbsValue = 1e300
		w, err := NewWorker(cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		vals := append([]string{}, normal...)
		if poison {
			vals = append(vals, `{"id":"poison","x":[1e160,1,1,1],"label":1}`)
		}
		vals = append(vals, probe)
		for i, v := range vals {
			if err := w.Process(ctx, Record{Offset: int64(i), Key: []byte("k"), Value: []byte(v)}); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range w.TakeOutputs() {
			switch o.Kind {
			case OutDeadLetter:
				dead = append(dead, o)
			case OutPrediction:
				var p topics.Prediction
				json.Unmarshal(o.Value, &p)
				if p.ID == "probe" {
					score = p.Score
				}
			}
		}
		return score, dead
	}
	clean, none := run(false)
	got, dead := run(true)
	if len(none) != 0 || len(dead) != 1 {
		t.Fatalf("%d dead letters without the poison, %d with it; want 0 and 1", len(none), len(dead))
	}
	if reason := dead[0].Headers["error"]; !strings.Contains(reason, "non-finite") || !strings.Contains(reason, "unchanged") {
		t.Fatalf("dead-letter reason %q", reason)
	}
	if got != clean || got == 0 {
		t.Fatalf("probe scored %v after the poison, %v without it: the state changed", got, clean)
	}
}

// A delayed label scores the prediction made when its event came: a sampler's
// queried events, answered by label records after a checkpoint and restore,
// count as labeled, and as mistakes exactly where the decided label was wrong.
func TestDelayedLabelsAreScored(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, "lasec-ss", `{"a":5}`) // a large a: most events are queried
	cfg.MaxPending = 1000
	w, err := NewWorker(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 3))
	truth := map[string]int{}
	var seen []Record
	for i := 0; i < 200; i++ {
		x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		id := fmt.Sprintf("e%d", i)
		truth[id] = 1
		if x[0]+x[1] < 0 {
			truth[id] = -1
		}
		xs, _ := json.Marshal(x)
		rec := Record{Offset: int64(i), Key: []byte("k"), Value: fmt.Appendf(nil, `{"id":%q,"x":%s}`, id, xs)}
		seen = append(seen, rec)
		if err := w.Process(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	decided := map[string]int{}
	var queried []string
	for _, o := range w.TakeOutputs() {
		var m struct {
			ID    string
			Label int
		}
		json.Unmarshal(o.Value, &m)
		switch o.Kind {
		case OutPrediction:
			decided[m.ID] = m.Label
		case OutQuery:
			queried = append(queried, m.ID)
		}
	}
	if len(queried) < 20 {
		t.Fatalf("only %d queries", len(queried))
	}
	w2 := restarted(t, w, seen)
	wantMistakes := 0
	for i, id := range queried {
		if decided[id] != truth[id] {
			wantMistakes++
		}
		if err := w2.Process(ctx, Record{Offset: int64(200 + i), Key: []byte("k"), Value: fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, truth[id])}); err != nil {
			t.Fatal(err)
		}
	}
	got := w2.Totals()
	if got.LabelsJoined != int64(len(queried)) || got.Labeled != int64(len(queried)) || got.DelayedLabeled != got.Labeled || got.Mistakes != int64(wantMistakes) || got.InputsLost != 0 {
		t.Fatalf("totals %+v; want %d joined and labeled, %d mistakes, no input lost", got, len(queried), wantMistakes)
	}
	// The labels taught the restored key as they teach one never stopped:
	// the awaited inputs its changelog record left out were read again.
	for i, id := range queried {
		if err := w.Process(ctx, Record{Offset: int64(200 + i), Key: []byte("k"), Value: fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, truth[id])}); err != nil {
			t.Fatal(err)
		}
	}
	sameStates(t, w2, w)
}

// With keyed.LearnQueried (the papers' protocol) a sampler learns only the labels
// it asked for: labels of events it did not query are scored but leave its
// state as if they had never come. With keyed.LearnAll (the default) they teach
// it: its state is then that of the same learner taught every label.
func TestSamplerLearnsOnlyWhatItAsked(t *testing.T) {
	for _, from := range []string{keyed.LearnQueried, keyed.LearnAll} {
		t.Run(from, func(t *testing.T) { testSamplerLearns(t, from) })
	}
}

func testSamplerLearns(t *testing.T, from string) {
	ctx := context.Background()
	cfg := testConfig(t, "lasec-ss", `{"a":0.3}`)
	cfg.MaxPending = 1000
	cfg.LearnFrom = from
	r := rand.New(rand.NewPCG(8, 8))
	var events []Record
	truth := map[string]int{}
	for i := 0; i < 300; i++ {
		x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		id := fmt.Sprintf("e%d", i)
		truth[id] = 1
		if x[0]-x[2] < 0 {
			truth[id] = -1
		}
		xs, _ := json.Marshal(x)
		events = append(events, Record{Offset: int64(i), Key: []byte("k"), Value: fmt.Appendf(nil, `{"id":%q,"x":%s}`, id, xs)})
	}
	answer := func(all bool) (*Worker, Totals) {
		w, err := NewWorker(cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		off := int64(0)
		for i, rec := range events { // each label right after its event
			rec.Offset = off
			off++
			if err := w.Process(ctx, rec); err != nil {
				t.Fatal(err)
			}
			asked := false
			for _, o := range w.TakeOutputs() {
				asked = asked || o.Kind == OutQuery
			}
			if !all && !asked {
				continue
			}
			id := fmt.Sprintf("e%d", i)
			if err := w.Process(ctx, Record{Offset: off, Key: []byte("k"), Value: fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, truth[id])}); err != nil {
				t.Fatal(err)
			}
			off++
		}
		return w, w.Totals()
	}
	wAll, all := answer(true)
	wAsked, asked := answer(false)
	// Every event came unlabeled: the ones the sampler asked for are its queries.
	if all.Labeled != 300 || asked.Labeled != asked.Queries || asked.Queries == 0 || asked.Queries >= 300 || asked.Asked != asked.Queries {
		t.Fatalf("labeled %d of 300 with every label, %d with the %d asked", all.Labeled, asked.Labeled, asked.Queries)
	}
	a, _ := wAll.keys["k"].Learner().MarshalBinary()
	b, _ := wAsked.keys["k"].Learner().MarshalBinary()
	if from == keyed.LearnQueried {
		if !bytes.Equal(a, b) {
			t.Fatal("the sampler's state depends on labels it did not ask for")
		}
		return
	}
	if bytes.Equal(a, b) {
		t.Fatal("labels the sampler did not ask for taught it nothing")
	}
	// Every label taught it: the state of the learner taught each event's
	// label at once (a delayed label learns from the current state, which
	// is the event's when nothing came between).
	l, err := learners.New("lasec-ss", json.RawMessage(`{"a":0.3}`), learners.Config{Dim: 4, Seed: cfg.Seed, Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range events {
		ev, _ := topics.Decode(rec.Value, 0)
		x, _ := learners.NewDense(ev.X)
		p, _ := l.Predict(x)
		p = l.Decide(p)
		if err := l.Learn(x, truth[fmt.Sprintf("e%d", i)], p); err != nil {
			t.Fatal(err)
		}
	}
	if c, _ := l.MarshalBinary(); !bytes.Equal(a, c) {
		t.Fatal("with every label the key's state is not the learner's taught every label")
	}
}

// A delayed label's outcome is dated by its event, across a restore.
func TestDelayedOutcomeKeepsItsEventTime(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t, "perceptron", "")
	w, _ := NewWorker(cfg, 0)
	if err := w.Process(ctx, Record{Offset: 0, Key: []byte("k"), Value: []byte(`{"id":"a","ts":"2026-11-20T10:00:00+02:00","x":[1,0,0,1]}`)}); err != nil {
		t.Fatal(err)
	}
	w2 := restarted(t, w, []Record{{Offset: 0, Key: []byte("k"), Value: []byte(`{"id":"a","ts":"2026-11-20T10:00:00+02:00","x":[1,0,0,1]}`)}})
	if err := w2.Process(ctx, Record{Offset: 1, Key: []byte("k"), Value: []byte(`{"id":"a","label":1}`)}); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	if o := w2.LastOutcome(); !o.Time.Equal(want) || w2.Totals().Labeled != 1 {
		t.Fatalf("outcome %+v, labeled %d; want the event's time %v", o, w2.Totals().Labeled, want)
	}
}

// A label for a key the partition has never seen is counted apart (a
// partitioning mistake shows in one counter) and makes no learner.
func TestLabelForAKeyNeverSeen(t *testing.T) {
	w, _ := NewWorker(testConfig(t, "perceptron", ""), 0)
	ctx := context.Background()
	for i, rec := range []Record{
		{Key: []byte("a"), Value: []byte(`{"id":"e1","x":[1,0,0,1]}`)},
		{Key: []byte("b"), Value: []byte(`{"id":"e1","label":1}`)}, // its event went elsewhere
		{Key: []byte("a"), Value: []byte(`{"id":"e9","label":1}`)}, // a known key, an unknown id
	} {
		rec.Offset = int64(i)
		if err := w.Process(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	st := w.Totals()
	if st.LabelsNoKey != 1 || st.LabelsUnknown != 2 || w.Keys() != 1 {
		t.Fatalf("totals %+v, %d keys", st, w.Keys())
	}
}

// Totals.Add adds every counter, the ones added after it was written too:
// each field of o is set by reflection, so a new field left out fails here.
func TestTotalsAddCoversEveryField(t *testing.T) {
	var o Totals
	v := reflect.ValueOf(&o).Elem()
	for i := 0; i < v.NumField(); i++ {
		switch f := v.Field(i); f.Kind() {
		case reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Array:
			for j := 0; j < f.Len(); j++ {
				f.Index(j).SetInt(int64(100 + j))
			}
		default:
			t.Fatalf("field %s of kind %s: teach Add and this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	var sum Totals
	sum.Add(o)
	sum.Add(o)
	s := reflect.ValueOf(sum)
	for i := 0; i < v.NumField(); i++ {
		want, got := v.Field(i), s.Field(i)
		if want.Kind() == reflect.Array {
			for j := 0; j < want.Len(); j++ {
				if got.Index(j).Int() != 2*want.Index(j).Int() {
					t.Fatalf("%s[%d] not added", v.Type().Field(i).Name, j)
				}
			}
		} else if got.Int() != 2*want.Int() {
			t.Fatalf("%s not added", v.Type().Field(i).Name)
		}
	}
}

// An event whose id is already awaiting its label in the same key is a dead
// letter with the reason: its label could not say which one it labels. The
// same id in another key, or again after the first was labeled, is fine.
func TestDuplicateIDWithinAKey(t *testing.T) {
	w, _ := NewWorker(testConfig(t, "perceptron", ""), 0)
	ctx := context.Background()
	var outs []Output
	for i, rec := range []Record{
		{Key: []byte("a"), Value: []byte(`{"id":"e1","x":[1,0,0,1]}`)},
		{Key: []byte("a"), Value: []byte(`{"id":"e1","x":[0,1,1,0]}`)},           // refused
		{Key: []byte("a"), Value: []byte(`{"id":"e1","x":[0,1,1,0],"label":1}`)}, // refused too
		{Key: []byte("b"), Value: []byte(`{"id":"e1","x":[0,1,1,0]}`)},           // another key
		{Key: []byte("a"), Value: []byte(`{"id":"e1","label":1}`)},               // joins the first
		{Key: []byte("a"), Value: []byte(`{"id":"e1","x":[1,1,1,1]}`)},           // free again
	} {
		rec.Offset = int64(i)
		if err := w.Process(ctx, rec); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, w.TakeOutputs()...)
	}
	st := w.Totals()
	if st.InvalidEvent != 2 || st.Predictions != 3 || st.LabelsJoined != 1 {
		t.Fatalf("totals %+v", st)
	}
	for _, o := range outs {
		if o.Kind == OutDeadLetter && !strings.Contains(o.Headers["error"], `duplicate id "e1"`) {
			t.Fatalf("dead letter without the reason: %v", o.Headers)
		}
	}
}

// refusingStore fails every Write while refuse is set, and records the keys
// of the writes it takes.
type refusingStore struct {
	*checkpoint.MemoryStore
	refuse  bool
	written []string
}

func (s *refusingStore) Write(ctx context.Context, keys []checkpoint.KeyRecord, m checkpoint.Marker) error {
	if s.refuse {
		return errors.New("refused")
	}
	for _, k := range keys {
		s.written = append(s.written, k.Key)
	}
	return s.MemoryStore.Write(ctx, keys, m)
}

// TestCheckpointWritesEachChangedKeyOnce checks the dirty list: a key
// changed many times is written once, in key order; a failed write leaves
// every key dirty for the next; a checkpoint with nothing changed writes no
// key.
func TestCheckpointWritesEachChangedKeyOnce(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		events  int
		nkeys   int
		refused int // checkpoints refused before the one that lands
	}{
		{"one checkpoint", 600, 7, 0},
		{"after one refused write", 600, 7, 1},
		{"after three refused writes", 900, 13, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWorker(testConfig(t, "perceptron", ""), 0)
			if err != nil {
				t.Fatal(err)
			}
			store := &refusingStore{MemoryStore: checkpoint.NewMemoryStore(), refuse: true}
			run(t, w, records(3, tc.events, tc.nkeys))
			for range tc.refused {
				if _, _, err := w.Checkpoint(ctx, store); err == nil {
					t.Fatal("refused write: no error")
				}
				dirtyStatesHeld(t, w)
			}
			store.refuse = false
			n, _, err := w.Checkpoint(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.nkeys || w.Keys() != tc.nkeys {
				t.Fatalf("checkpoint wrote %d key records for %d keys held, want %d", n, w.Keys(), tc.nkeys)
			}
			keys := store.written
			if !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != tc.nkeys {
				t.Fatalf("key records %q: want %d distinct keys in order", keys, tc.nkeys)
			}
			if n, _, err := w.Checkpoint(ctx, store); err != nil || n != 0 {
				t.Fatalf("checkpoint with nothing changed: %d records, %v", n, err)
			}
			run(t, w, []Record{{Offset: int64(tc.events), Key: []byte("k1"), Value: []byte(`{"id":"again","x":[1,2,3,4],"label":1}`)}})
			if n, _, err := w.Checkpoint(ctx, store); err != nil || n != 1 {
				t.Fatalf("checkpoint after one key changed: %d records, %v; want 1", n, err)
			}
		})
	}
}
