package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

func populationConfig(t *testing.T, learner, params string) Config {
	t.Helper()
	cfg := testConfig(t, learner, params)
	cfg.Population = learner
	return cfg
}

// Crash at random points with a population model (the mixture, or the
// additive model's shared part): the restored workers end bit-identical to
// an uninterrupted run, the population model and every key seeded from it
// included, and every event is predicted exactly once.
func TestPopulationCrashRestoreIsBitIdentical(t *testing.T) {
	for _, c := range []struct {
		learner, params, population string
		apart                       bool // keys that share nothing: the additive model's keys learn alone
	}{
		{"lasec-ss", `{"a":0.3}`, "lasec-ss", false}, {"perceptron", "", "perceptron", false}, {"budget-perceptron", `{"budget":20}`, "budget-perceptron", false},
		{"logreg", "", keyed.PopulationAdditive, false}, {"lasec-ss", `{"a":0.3}`, keyed.PopulationAdditive, false},
		{"logreg", "", keyed.PopulationAdditive, true},
	} {
		t.Run(fmt.Sprintf("%s/%s/apart=%v", c.learner, c.population, c.apart), func(t *testing.T) {
			cfg := testConfig(t, c.learner, c.params)
			cfg.Population = c.population
			recs := records(3, 3000, 40)
			if c.apart {
				recs = keyedRecords(3, 3000, 400, true)
			}
			ref, _ := NewWorker(cfg, 0)
			run(t, ref, recs)
			if _, ok := ref.keys[keyed.PopulationKey]; !ok {
				t.Fatal("no population model")
			}
			newWorker := func() *Worker { w, _ := NewWorker(cfg, 0); return w }
			w := crashing(t, recs, newWorker, nil)
			sameStates(t, w, ref)
		})
	}
}

// The population model is shown every label of the partition exactly once,
// in the order the labels come (inline with their event, or in a label
// record, those its keys did not ask for too), and learns it as its learner
// does (a sampler: when its own rule draws it): it ends where one learner
// of its streams shown that sequence ends.
func TestPopulationLearnsEveryLabelOnce(t *testing.T) {
	for _, c := range []struct{ learner, params string }{{"lasec-ss", `{"a":0.3}`}, {"perceptron", ""}} {
		t.Run(c.learner, func(t *testing.T) {
			cfg := populationConfig(t, c.learner, c.params)
			recs := records(5, 2000, 7)
			w, _ := NewWorker(cfg, 0)
			run(t, w, recs)
			ref, err := learners.New(c.learner, json.RawMessage(c.params), learners.Config{Dim: dim, Seed: cfg.Seed, Key: keyed.PopulationKey})
			if err != nil {
				t.Fatal(err)
			}
			inputs := map[string]learners.Vector{} // key/id → x of an unlabeled event
			taught, learned := 0, 0
			for _, r := range recs {
				ev, err := topics.Decode(r.Value, 0)
				if err != nil {
					t.Fatal(err)
				}
				x := inputs[string(r.Key)+"/"+ev.ID]
				if ev.Kind == topics.Input {
					if x, err = cfg.Vector.Vector(ev); err != nil {
						t.Fatal(err)
					}
					if ev.Label == 0 {
						inputs[string(r.Key)+"/"+ev.ID] = x
						continue
					}
				}
				p, _ := ref.Predict(x)
				taught++
				if p = ref.Decide(p); c.learner == "lasec-ss" && !p.Query {
					continue
				}
				if err := ref.Learn(x, ev.Label, p); err != nil {
					t.Fatal(err)
				}
				learned++
			}
			pop := w.keys[keyed.PopulationKey].Learner()
			for i := range 20 {
				probe, _ := learners.NewDense([]float64{float64(i), 1, -float64(i) / 3, 0.5})
				a, _ := pop.Predict(probe)
				b, _ := ref.Predict(probe)
				if a.Score != b.Score {
					t.Fatalf("probe %d: the population scores %v, a learner taught the %d labels in order %v", i, a.Score, taught, b.Score)
				}
			}
			if st := w.Totals(); int64(taught) != st.Labeled || learned == 0 || c.learner == "perceptron" && learned != taught {
				t.Fatalf("%d labels shown, %d learned, %d scored", taught, learned, st.Labeled)
			}
		})
	}
}

// A key seen for the first time predicts as the population model does; one
// reset by the key API starts from it again. Without a population it
// predicts from zero.
func TestNewKeyStartsAsThePopulation(t *testing.T) {
	for _, population := range []bool{true, false} {
		cfg := testConfig(t, "perceptron", "")
		if population {
			cfg.Population = "perceptron"
		}
		w, _ := NewWorker(cfg, 0)
		run(t, w, records(6, 600, 5))
		event := Record{Offset: 10_000, Key: []byte("newcomer"), Value: []byte(`{"id":"n1","x":[1,-2,0.5,3]}`)}
		outs := run(t, w, []Record{event})
		var pred struct{ Score float64 }
		if err := json.Unmarshal(outs[0].Value, &pred); err != nil {
			t.Fatal(err)
		}
		x, _ := learners.NewDense([]float64{1, -2, 0.5, 3})
		if !population {
			if pred.Score != 0 {
				t.Fatalf("without a population, a new key's first score is %v, want 0", pred.Score)
			}
			continue
		}
		want, _ := w.keys[keyed.PopulationKey].Learner().Predict(x)
		if pred.Score != want.Score || want.Score == 0 {
			t.Fatalf("a new key scored %v, the population %v", pred.Score, want.Score)
		}
		// Teach the key something of its own, then reset it: a copy again.
		run(t, w, []Record{{Offset: 10_001, Key: []byte("newcomer"), Value: []byte(`{"id":"n2","x":[1,-2,0.5,3],"label":-1}`)},
			{Offset: 10_002, Key: []byte("newcomer"), Value: []byte(`{"id":"n3","x":[1,-2,0.5,3],"label":-1}`)}})
		if weight, ok := w.keys["newcomer"].PopulationWeight(); !ok || weight == keyed.MixtureStart {
			t.Fatalf("the taught key's population weight %v (%v): still where it started", weight, ok)
		}
		if ok, err := w.Reset("newcomer"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if weight, ok := w.keys["newcomer"].PopulationWeight(); ok {
			t.Fatalf("a reset key keeps its mixture (population weight %v)", weight)
		}
		got, _ := w.keys["newcomer"].Learner().Predict(x)
		want, _ = w.keys[keyed.PopulationKey].Learner().Predict(x)
		if got.Score != want.Score {
			t.Fatalf("after a reset the key scores %v, the population %v", got.Score, want.Score)
		}
	}
}

// The population's key is not an entity's: a record with it is
// dead-lettered; and the population model must be the keys' learner.
func TestPopulationKeyAndLearnerAreChecked(t *testing.T) {
	w, _ := NewWorker(populationConfig(t, "perceptron", ""), 0)
	outs := run(t, w, []Record{{Offset: 0, Key: []byte(keyed.PopulationKey), Value: []byte(`{"id":"a","x":[1,2,3,4],"label":1}`)}})
	if len(outs) != 1 || outs[0].Kind != OutDeadLetter || !bytes.Contains([]byte(outs[0].Headers["error"]), []byte("reserved")) {
		t.Fatalf("outputs %+v", outs)
	}
	run(t, w, []Record{{Offset: 1, Key: []byte("k"), Value: []byte(`{"id":"b","x":[1,2,3,4],"label":1}`)}})
	before, _ := w.keys[keyed.PopulationKey].MarshalBinary()
	if ok, err := w.Reset(keyed.PopulationKey); ok || err != nil {
		t.Fatalf("the population model was reset by hand: %v, %v", ok, err)
	}
	if after, _ := w.keys[keyed.PopulationKey].MarshalBinary(); !bytes.Equal(before, after) {
		t.Fatal("a refused reset changed the population model")
	}
	cfg := testConfig(t, "lasec-ss", "")
	cfg.Population = "perceptron"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "or the keys' learner's name, lasec-ss") {
		t.Fatalf("another learner as the population: %v", err)
	}
	for _, off := range []string{"", "off"} {
		cfg := testConfig(t, "lasec-ss", "")
		cfg.Population = off
		if err := cfg.Validate(); err != nil || cfg.Population != off || cfg.WithDefaults().Population != keyed.PopulationOff {
			t.Fatalf("population %q: %v, %q (Validate must change nothing), with defaults %q", off, err, cfg.Population, cfg.WithDefaults().Population)
		}
	}
}

// BenchmarkPopulationCPU is the CPU per event of a partition with and
// without a population model (the mixture, and the additive model that is
// the service's default with logreg), with the d = 10 labeled events of
// 1,000 keys (issues 34 and 45: at most 1.3 times the per-key learners'
// alone):
//
//	go test -run '^$' -bench BenchmarkPopulationCPU -count 5 ./pipeline
func BenchmarkPopulationCPU(b *testing.B) {
	const d = 10
	r := rand.New(rand.NewPCG(3, 4))
	recs := make([]Record, 50_000)
	for i := range recs {
		x := make([]float64, d)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		y := 1
		if x[0]+x[1] < 0 {
			y = -1
		}
		xs, _ := json.Marshal(x)
		recs[i] = Record{Key: fmt.Appendf(nil, "key-%d", r.IntN(1000)), Value: fmt.Appendf(nil, `{"id":"e%d","x":%s,"label":%d}`, i, xs, y)}
	}
	for _, learner := range []string{"perceptron", "lasec-ss", "logreg"} {
		for _, population := range []string{keyed.PopulationOff, learner, keyed.PopulationAdditive} {
			b.Run(learner+"/population-"+population, func(b *testing.B) {
				vec, _ := topics.NewVectorizer(d, 0)
				cfg := Config{Settings: keyed.Settings{Learner: learner, Seed: 1, Vector: vec, QueryScale: 1, Population: population}}
				w, err := NewWorker(cfg, 0)
				if err != nil {
					b.Fatal(err)
				}
				processLoop(b, w, recs, 0)
			})
		}
	}
}

// Keys that share the population's concept and one whose concept is the
// opposite: the rebel ends up following its own learner; the population
// leads (it predicts young keys well), so a newcomer's first prediction is
// the population's.
func TestDepartingKeyFollowsItself(t *testing.T) {
	cfg := populationConfig(t, "perceptron", "")
	r := rand.New(rand.NewPCG(5, 5))
	var recs []Record
	for i := range 6000 {
		key := fmt.Sprintf("k%d", r.IntN(20))
		if i%10 == 0 {
			key = "rebel"
		}
		x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		y := 1
		if x[0]+x[1]-x[2] < 0 {
			y = -1
		}
		if key == "rebel" {
			y = -y
		}
		xs, _ := json.Marshal(x)
		recs = append(recs, Record{Offset: int64(i), Key: []byte(key), Value: fmt.Appendf(nil, `{"id":"e%d","x":%s,"label":%d}`, i, xs, y)})
	}
	w, _ := NewWorker(cfg, 0)
	run(t, w, recs)
	if weight, ok := w.keys["rebel"].PopulationWeight(); !ok || weight >= 0.5 {
		t.Fatalf("the rebel's population weight %v (%v): it follows the population", weight, ok)
	}
	if info, ok, _ := w.Inspect("rebel"); !ok || info.Follows != "own" || info.PopulationWeight == nil || *info.PopulationWeight >= 0.5 {
		t.Fatalf("the key API says the rebel follows %q (population weight %v)", info.Follows, info.PopulationWeight)
	}
	// A newcomer's first prediction is the population's, and its mixture
	// starts at mixStart.
	ps := w.keys[keyed.PopulationKey]
	if prior, _ := ps.PopulationWeight(); prior < 0.6 {
		t.Fatalf("the population does not lead (prior %v) where 20 of 21 keys share its concept", prior)
	}
	x, _ := learners.NewDense([]float64{1, 1, 0, 0})
	want, err := ps.Learner().Predict(x)
	if err != nil {
		t.Fatal(err)
	}
	outs := run(t, w, []Record{{Offset: 6000, Key: []byte("newcomer"), Value: []byte(`{"id":"n0","x":[1,1,0,0]}`)}})
	var got topics.Prediction
	if len(outs) == 0 || json.Unmarshal(outs[0].Value, &got) != nil || got.Label != want.Label || got.Score != want.Score {
		t.Fatalf("the newcomer's first prediction %s; the population's %+v", outs[0].Value, want)
	}
	if weight, _ := w.keys["newcomer"].PopulationWeight(); weight != keyed.MixtureStart {
		t.Fatalf("a newcomer's population weight %v starts elsewhere than at %v", weight, keyed.MixtureStart)
	}
}

// The partition's prior: where the population model predicts young keys
// near chance (every key has a concept of its own), a new key's learner
// starts from scratch and its mixture follows it; where it predicts them well
// (every key shares its concept, labels noisy), a new key's learner starts
// as a copy of it and its mixture at mixStart.
func TestNewKeysStartFromThePrior(t *testing.T) {
	for _, tc := range []struct {
		name   string
		depart bool
		leads  bool
	}{{"every key departs", true, false}, {"every key shares", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := NewWorker(populationConfig(t, "perceptron", ""), 0)
			r := rand.New(rand.NewPCG(7, 7))
			var recs []Record
			for i := range 8000 {
				k := r.IntN(800) // 800 keys, interleaved, about 10 events each
				x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
				m := x[0] + x[1] - x[2]
				if tc.depart { // each key its own concept
					m = x[k%4]
					if k%8 >= 4 {
						m = -m
					}
				}
				y := 1
				if m < 0 {
					y = -1
				}
				if !tc.depart && r.Float64() < 0.1 {
					y = -y
				}
				xs, _ := json.Marshal(x)
				recs = append(recs, Record{Offset: int64(i), Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, `{"id":"e%d","x":%s,"label":%d}`, i, xs, y)})
			}
			run(t, w, recs)
			run(t, w, []Record{{Offset: 8000, Key: []byte("newcomer"), Value: []byte(`{"id":"n0","x":[1,0,0,0]}`)}})
			ps := w.keys[keyed.PopulationKey]
			newcomer := w.keys["newcomer"]
			start := map[bool]float64{true: keyed.MixtureStart, false: 1 - keyed.MixtureStart}[tc.leads]
			prior, _ := ps.PopulationWeight()
			if weight, _ := newcomer.PopulationWeight(); weight != start {
				t.Fatalf("the prior %v (want it to lead: %v); a new key starts at %v, want %v", prior, tc.leads, weight, start)
			}
			fresh, err := learners.New(w.cfg.Learner, w.cfg.Params, learners.Config{Dim: w.cfg.Vector.Dim, Seed: w.cfg.Seed, Key: "newcomer"})
			if err != nil {
				t.Fatal(err)
			}
			a, _ := newcomer.Learner().MarshalBinary()
			b, _ := fresh.MarshalBinary()
			c, _ := ps.Learner().MarshalBinary()
			if copied := bytes.Equal(a, c); copied != tc.leads || !tc.leads && !bytes.Equal(a, b) {
				t.Fatalf("the new key's learner is a copy of the population: %v, want %v (a fresh learner: %v)", copied, tc.leads, bytes.Equal(a, b))
			}
		})
	}
}
