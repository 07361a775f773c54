package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/topics"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/drift"
)

// flipping is one key's labeled events whose concept flips at event at.
func flipping(seed uint64, n, at int) []Record {
	r := rand.New(rand.NewPCG(seed, 3))
	var out []Record
	for i := 0; i < n; i++ {
		x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		m := x[0] + x[1] - x[2]
		if i >= at {
			m = -m
		}
		y := 1
		if m < 0 {
			y = -1
		}
		xs, _ := json.Marshal(x)
		out = append(out, Record{Offset: int64(i), Key: []byte("k"), Value: fmt.Appendf(nil, `{"id":"e%d","ts":"2026-11-20T10:00:00Z","x":%s,"label":%d}`, i, xs, y)})
	}
	return out
}

func alertsOf(outs []Output) []topics.DriftAlert {
	var as []topics.DriftAlert
	for _, o := range outs {
		if o.Kind == OutAlert {
			var a topics.DriftAlert
			json.Unmarshal(o.Value, &a)
			as = append(as, a)
		}
	}
	return as
}

// A concept flip on a key raises one alert from its mistakes detector, soon
// after the flip and none before it, with the rise it measured (and the
// mistake rates of the same windows); with on-drift reset, the key's
// learner restarts.
func TestDriftAlert(t *testing.T) {
	for _, action := range []string{keyed.OnDriftAlert, keyed.OnDriftReset} {
		cfg := testConfig(t, "perceptron", "")
		cfg.Detectors = []keyed.DetectorSpec{{Detector: "adwin", Signal: keyed.SignalMistakes}}
		cfg.OnDrift = action
		w, err := NewWorker(cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		outs := run(t, w, flipping(1, 4000, 2000))
		as := alertsOf(outs)
		if len(as) == 0 {
			t.Fatalf("%s: no alert for the flip", action)
		}
		a := as[0]
		if len(as) != 1 || a.Kind != topics.AlertOpened || a.Offset < 2000 || a.Offset > 2300 || a.Detector != "adwin" || a.Signal != keyed.SignalMistakes || a.Key != "k" || a.Action != action ||
			a.TS == nil || *a.TS != "2026-11-20T10:00:00Z" || a.Recent-a.Reference < keyed.DefaultAlertMinRise || a.RecentN < keyed.RecentWindow || a.ReferenceN != keyed.ReferenceWindow ||
			a.MistakeRateBefore == nil || a.MistakeRateAfter == nil || *a.MistakeRateAfter != a.Recent || *a.MistakeRateBefore != a.Reference {
			t.Fatalf("%s: %d alerts, first %+v", action, len(as), a)
		}
		st := w.Totals()
		if st.Alerts != int64(len(as)) || st.AlertsBy[0] != st.Alerts || (action == keyed.OnDriftReset) != (st.Resets == st.Alerts) {
			t.Fatalf("%s: totals %+v for %d alerts", action, st, len(as))
		}
		t.Logf("%s: alert %d events after the flip; mistake rate %.3f over %d → %.3f over %d", action, a.Offset-2000, a.Reference, a.ReferenceN, a.Recent, a.RecentN)
	}
}

// Detectors are part of the key's checkpoint: a restore in the middle gives
// the same alerts, byte for byte, as an uninterrupted run.
func TestDriftAlertsReplayAfterRestore(t *testing.T) {
	cfg := testConfig(t, "lasec", "")
	cfg.Detectors = []keyed.DetectorSpec{{Detector: "adwin", Signal: keyed.SignalMistakes}, {Detector: "page-hinkley", Signal: keyed.SignalScore, Params: json.RawMessage(`{"threshold":5}`)},
		{Detector: "ddm", Signal: keyed.SignalMistakes}}
	cfg.AlertMinRise = keyed.NoMinRise // lasec recovers from the flip in a few mistakes: every detection counts here
	cfg.AlertResolved = true
	recs := flipping(2, 4000, 1800)
	whole, _ := NewWorker(cfg, 0)
	want := run(t, whole, recs)
	first, _ := NewWorker(cfg, 0)
	got := run(t, first, recs[:1700])
	got = append(got, run(t, restarted(t, first, recs[:1700]), recs[1700:])...)
	wa, ga := alertsOf(want), alertsOf(got)
	if len(wa) == 0 || len(wa) != len(ga) {
		t.Fatalf("%d alerts uninterrupted, %d across a restore", len(wa), len(ga))
	}
	for i := range wa {
		a, _ := json.Marshal(wa[i])
		b, _ := json.Marshal(ga[i])
		if !bytes.Equal(a, b) {
			t.Fatalf("alert %d differs:\n%s\n%s", i, a, b)
		}
	}
}

func TestDetectorConfig(t *testing.T) {
	for _, tc := range []struct {
		specs   []keyed.DetectorSpec
		onDrift string
	}{
		{[]keyed.DetectorSpec{{Detector: "nope", Signal: keyed.SignalMistakes}}, ""},
		{[]keyed.DetectorSpec{{Detector: "adwin", Signal: "loss"}}, ""},
		{[]keyed.DetectorSpec{{Detector: "adwin", Signal: keyed.SignalMistakes, Params: json.RawMessage(`{"delta":7}`)}}, ""},
		{nil, "panic"},
		{make([]keyed.DetectorSpec, keyed.MaxDetectors+1), ""},
		{[]keyed.DetectorSpec{{Detector: "adwin", Signal: keyed.SignalMistakes}, {Detector: "adwin", Signal: keyed.SignalMistakes, Params: json.RawMessage(`{"delta":0.1}`)}}, ""},
	} {
		cfg := testConfig(t, "perceptron", "")
		cfg.Detectors, cfg.OnDrift = tc.specs, tc.onDrift
		if _, err := NewWorker(cfg, 0); err == nil {
			t.Errorf("%+v %q accepted", tc.specs, tc.onDrift)
		}
	}
}

// The incident is the key's: of three detectors that each confirm a flip,
// the first raises the alert and the others join its incident — unless each
// detector has an incident of its own (side-by-side scoring), when each
// alerts once.
func TestIncidentIsPerKey(t *testing.T) {
	for _, perDetector := range []bool{false, true} {
		cfg := testConfig(t, "perceptron", "")
		cfg.Detectors = []keyed.DetectorSpec{{Detector: "adwin", Signal: keyed.SignalMistakes}, {Detector: "ddm", Signal: keyed.SignalMistakes},
			{Detector: "hddm-a", Signal: keyed.SignalMistakes}}
		cfg.IncidentPerDetector = perDetector
		w, _ := NewWorker(cfg, 0)
		as := alertsOf(run(t, w, flipping(1, 4000, 2000)))
		by := map[string]int{}
		for _, a := range as {
			by[a.Detector]++
		}
		st := w.Totals()
		switch {
		case !perDetector && (len(as) != 1 || st.DetectionsAbsorbed == 0):
			t.Fatalf("one incident per key: %d alerts (%v), %d detections absorbed; want 1 alert, the others absorbed", len(as), by, st.DetectionsAbsorbed)
		case perDetector && (len(by) < 2 || by["adwin"] > 1 || by["ddm"] > 1 || by["hddm-a"] > 1):
			t.Fatalf("an incident per detector: alerts by detector %v, want at most one each, from two or more", by)
		}
	}
}

// verdictDetector says what it is told, whatever it is fed.
type verdictDetector struct {
	drift.Detector
	verdict drift.State
}

func (d *verdictDetector) Add(float64) drift.State { return d.verdict }

// BenchmarkProcess times one event through the worker: a labeled one without and
// with the default drift detectors (ADWIN on mistakes and on queries), and an
// unlabeled one into a key that holds 1,000 events awaiting their labels.
//
//	go test -run '^$' -bench Process -benchmem ./pipeline
func BenchmarkProcess(b *testing.B) {
	recs := flipping(9, 4096, 2048)
	for _, tc := range []struct {
		name string
		dets []keyed.DetectorSpec
	}{{"no-detectors", nil}, {"two-adwin", []keyed.DetectorSpec{{Detector: "adwin", Signal: keyed.SignalMistakes}, {Detector: "adwin", Signal: keyed.SignalQueries}}}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := testConfig(b, "perceptron", "")
			cfg.Detectors = tc.dets
			w, err := NewWorker(cfg, 0)
			if err != nil {
				b.Fatal(err)
			}
			processLoop(b, w, recs, 0)
		})
	}
	// Unlabeled events whose labels never come: the key holds MaxPending
	// (1,000) awaited events, and every new event is checked against them
	// for a duplicate id.
	b.Run("unlabeled-1000-pending", func(b *testing.B) {
		cfg := testConfig(b, "perceptron", "")
		cfg.MaxPending, cfg.PendingTTL, cfg.MaxPendingBytes, cfg.MaxKeyBytes = 1000, 1<<40, 1<<30, -1
		w, err := NewWorker(cfg, 0)
		if err != nil {
			b.Fatal(err)
		}
		unlabeled := make([]Record, len(recs))
		for k, r := range recs {
			r.Value = fmt.Appendf(nil, `{"id":"u%d","x":[1,2,3,4]}`, k)
			unlabeled[k] = r
		}
		for i := range 1000 { // fill the pending queue
			r := unlabeled[i]
			r.Offset = int64(i)
			w.Process(context.Background(), r)
		}
		processLoop(b, w, unlabeled, 1000)
	})
}

// processLoop feeds w the records round and round, at offsets from first
// on, taking the outputs every 1,024 records, for b.Loop's iterations.
func processLoop(b *testing.B, w *Worker, recs []Record, first int) {
	b.ReportAllocs()
	i := first
	for b.Loop() {
		r := recs[i%len(recs)]
		r.Offset = int64(i)
		if err := w.Process(context.Background(), r); err != nil {
			b.Fatal(err)
		}
		if i++; i%1024 == 0 {
			w.TakeOutputs()
		}
	}
}

// The keys-in-warning level follows a key's state out of memory: a key in
// warning that is evicted to the key store, or replaced or emptied by a
// record while a kept state catches up, leaves the level (the warning is
// not persisted, so the state comes back out of warning).
func TestKeysInWarningLeavesWithTheState(t *testing.T) {
	for _, how := range []string{"evicted", "replaced", "emptied"} {
		t.Run(how, func(t *testing.T) {
			cfg := testConfig(t, "perceptron", "")
			cfg.Detectors = []keyed.DetectorSpec{{Detector: "ddm", Signal: keyed.SignalMistakes}}
			w, _ := NewWorker(cfg, 0)
			if how == "evicted" {
				if err := w.UseKeyStore(newTestKeys(t), 1); err != nil {
					t.Fatal(err)
				}
			}
			for _, k := range []string{"a", "b"} {
				ks, err := w.model.NewState(k)
				if err != nil {
					t.Fatal(err)
				}
				w.keys[k] = ks
				if w.cache != nil {
					w.cache.count++
				}
				w.markDirty(k, ks)
			}
			a := w.keys["a"]
			a.Detectors()[0] = &verdictDetector{Detector: a.Detectors()[0], verdict: drift.Warning} // encodes as the DDM it wraps
			run(t, w, []Record{{Offset: 1, Key: []byte("a"), Value: []byte(`{"id":"e","x":[1,0,0,0],"label":1}`)}})
			if got := w.Totals().KeysInWarning; got != 1 {
				t.Fatalf("%d keys in warning, want 1", got)
			}
			sink := &restoring{w: w, inPlace: true}
			switch how {
			case "evicted": // the cache holds one key: the checkpoint evicts a, the first
				if _, err := w.TakeCheckpoint(); err != nil {
					t.Fatal(err)
				}
			case "replaced":
				state, err := a.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				sink.Put(&checkpoint.KeyRecord{Key: "a", AppliedThrough: a.Applied, State: state})
			case "emptied":
				sink.Put(&checkpoint.KeyRecord{Key: "a"})
			}
			if got, ks := w.Totals().KeysInWarning, w.keys["a"]; got != 0 || ks == a {
				t.Fatalf("%d keys in warning once a's state left memory (still held: %v), want 0", got, ks == a)
			}
		})
	}
}

// A key whose learner gets better — a perceptron learning a fixed concept
// from scratch, its mistake rate and its margin rule's query probability
// falling — raises no alert from ADWIN (the default), Page-Hinkley or
// HDDM-A. (DDM is left out: at its 30-value warm-up the learning curve's
// noise crosses its level now and then, as in MOA; docs/OPERATIONS.md gives
// its false-alarm rates.)
func TestImprovementRaisesNoAlert(t *testing.T) {
	cfg := testConfig(t, "perceptron", "")
	cfg.Detectors = []keyed.DetectorSpec{{Detector: "adwin", Signal: keyed.SignalMistakes}, {Detector: "adwin", Signal: keyed.SignalQueries},
		{Detector: "page-hinkley", Signal: keyed.SignalMistakes}, {Detector: "hddm-a", Signal: keyed.SignalMistakes}, {Detector: "adwin", Signal: keyed.SignalScore}}
	w, err := NewWorker(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for k := range 10 {
		for _, r := range flipping(uint64(20+k), 3000, 1<<30) { // one concept, never flipped
			r.Key = fmt.Appendf(nil, "k%d", k)
			r.Offset = int64(len(recs))
			r.Value = bytes.Replace(r.Value, []byte(`"id":"e`), fmt.Appendf(nil, `"id":"k%d-e`, k), 1)
			recs = append(recs, r)
		}
	}
	outs := run(t, w, recs)
	if as := alertsOf(outs); len(as) != 0 {
		t.Fatalf("%d alerts on keys that only got better, first %+v", len(as), as[0])
	}
	st := w.Totals()
	if st.Mistakes == 0 || st.Labeled != 30000 {
		t.Fatalf("totals %+v", st)
	}
}

// A detector whose test counts mistakes is refused on a real-valued signal:
// the score always, the queries of a learner that does not sample.
func TestBinaryDetectorsOnlyOnBinarySignals(t *testing.T) {
	for _, tc := range []struct {
		learner, detector, signal string
		ok                        bool
	}{
		{"perceptron", "ddm", keyed.SignalMistakes, true},
		{"perceptron", "eddm", keyed.SignalMistakes, true},
		{"perceptron", "ddm", keyed.SignalScore, false},
		{"perceptron", "eddm", keyed.SignalScore, false},
		{"perceptron", "ddm", keyed.SignalQueries, false},
		{"lasec-ss", "eddm", keyed.SignalQueries, true},
		{"perceptron", "hddm-a", keyed.SignalScore, true},
		{"perceptron", "page-hinkley", keyed.SignalQueries, true},
	} {
		cfg := testConfig(t, tc.learner, "")
		cfg.Detectors = []keyed.DetectorSpec{{Detector: tc.detector, Signal: tc.signal}}
		err := cfg.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s %s on %s: %v, want ok=%v", tc.learner, tc.detector, tc.signal, err, tc.ok)
		}
	}
}

// Every detector's state is in the key-record bound, ADWIN's histogram at
// its largest included; a bucket count past the bound is refused.
func TestDetectorStateIsInTheKeyBound(t *testing.T) {
	size := func(params string) int64 {
		cfg := testConfig(t, "perceptron", "")
		cfg.Detectors = []keyed.DetectorSpec{{Detector: "adwin", Signal: keyed.SignalMistakes, Params: json.RawMessage(params)}}
		cfg.MaxKeyBytes = -1
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		cfg = cfg.WithDefaults()
		n, err := cfg.KeyRecordBytes()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	small, big := size(`{"max_buckets":5}`), size(`{"max_buckets":64}`)
	if big-small < 59*64*16 {
		t.Fatalf("key bound %d with 5 buckets a row, %d with 64: ADWIN's rows are not counted", small, big)
	}
	cfg := testConfig(t, "perceptron", "")
	cfg.Detectors = []keyed.DetectorSpec{{Detector: "adwin", Signal: keyed.SignalMistakes, Params: json.RawMessage(`{"max_buckets":65}`)}}
	if err := cfg.Validate(); err == nil {
		t.Fatal("max_buckets 65 accepted")
	}
}
