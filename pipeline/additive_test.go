package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

func additiveConfig(t *testing.T, learner, params string) Config {
	t.Helper()
	cfg := testConfig(t, learner, params)
	cfg.Population = keyed.PopulationAdditive
	return cfg
}

// Every prediction of the additive model is the sum of the key's margin
// and, when the key takes it, the shared part's, as they stood when the
// event came; a label teaches the key's part at that sum and the shared
// part at the sum (or at its own margin, for a key that does not take it);
// a new key's own part starts at zero, and it takes the shared part while
// the partition's prior — the shared part's accuracy on young keys' labels
// — is at least 0.6, choosing again at each of its first 20 events (and at
// a delayed label meanwhile), then keeping its choice. Replayed by hand with two learners per key and the
// prior, outside the pipeline, the same records end in the same states bit
// for bit and the same scores. On keys that share nothing the prior falls
// and later keys are learners of their own; on keys that share a concept
// every key takes the shared part.
func TestAdditiveModelIsTheSumOfItsParts(t *testing.T) {
	// keyed's constants: youngEvents, priorRate, leadAccuracy, MixtureStart.
	const young, rate, lead = 20, 0.01, 0.6
	for _, c := range []struct {
		learner, params string
		apart           bool
	}{{"logreg", "", false}, {"perceptron", "", false}, {"lasec", "", false}, {"logreg", "", true}, {"perceptron", "", true}} {
		t.Run(fmt.Sprintf("%s/apart=%v", c.learner, c.apart), func(t *testing.T) {
			cfg := additiveConfig(t, c.learner, c.params)
			recs := records(4, 2500, 9)
			if c.apart {
				recs = keyedRecords(5, 4000, 600, true)
			}
			w, err := NewWorker(cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			outs := run(t, w, recs)
			scores := map[string]float64{} // id → score emitted
			posteriors := 0
			for _, o := range outs {
				if o.Kind != OutPrediction {
					continue
				}
				var p topics.Prediction
				if err := json.Unmarshal(o.Value, &p); err != nil {
					t.Fatal(err)
				}
				scores[p.Key+"/"+p.ID] = p.Score
				if p.Posterior != nil {
					posteriors++
					if math.Abs(*p.Posterior-1/(1+math.Exp(-p.Score))) > 1e-12 {
						t.Fatalf("posterior %g of score %g", *p.Posterior, p.Score)
					}
				}
			}
			if want := map[bool]int{true: len(scores), false: 0}[c.learner == "logreg"]; posteriors != want {
				t.Fatalf("%d predictions carry a posterior, want %d", posteriors, want)
			}
			mk := func(key string) learners.Summand {
				l, err := learners.New(c.learner, json.RawMessage(c.params), learners.Config{Dim: dim, Seed: cfg.Seed, Key: key})
				if err != nil {
					t.Fatal(err)
				}
				return l.(learners.Summand)
			}
			shared := mk(keyed.PopulationKey)
			own := map[string]learners.Summand{}
			takes := map[string]float64{} // the key's share of the shared part: 1 or 0
			born := map[string]float64{}  // its share at its first event
			events := map[string]int{}
			prior := keyed.MixtureStart
			waiting := map[string]learners.Vector{}
			choose := func(key string) { // while the key is young, by the prior
				if _, ok := takes[key]; !ok || events[key] < young {
					takes[key] = 0
					if prior >= lead {
						takes[key] = 1
					}
				}
			}
			teach := func(key string, x learners.Vector, y int, delayed bool) {
				if delayed { // an inline label is learned at its event's sum
					choose(key)
				}
				a, _ := shared.Predict(x)
				b, _ := own[key].Predict(x)
				m := b.Score + takes[key]*a.Score
				if events[key] <= young {
					right := 0.0
					if a.Label == y {
						right = 1
					}
					prior = (1-rate)*prior + rate*right
				}
				if err := own[key].LearnSum(x, y, m); err != nil {
					t.Fatal(err)
				}
				sm := m
				if takes[key] == 0 {
					sm = a.Score
				}
				if err := shared.LearnSum(x, y, sm); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range recs {
				key := string(r.Key)
				ev, err := topics.Decode(r.Value, 0)
				if err != nil {
					t.Fatal(err)
				}
				if ev.Kind == topics.LabelRecord {
					x, ok := waiting[key+"/"+ev.ID]
					if ok {
						delete(waiting, key+"/"+ev.ID)
						teach(key, x, ev.Label, true)
					}
					continue
				}
				x := mustVec(t, ev.X)
				a, _ := shared.Predict(x)
				choose(key)
				if own[key] == nil {
					own[key], born[key] = mk(key), takes[key]
					if got, want := scores[key+"/"+ev.ID], takes[key]*a.Score; got != want {
						t.Fatalf("key %s's first score %g, want %g (share %g)", key, got, want, takes[key])
					}
				}
				events[key]++
				b, _ := own[key].Predict(x)
				if got, want := scores[key+"/"+ev.ID], b.Score+takes[key]*a.Score; got != want {
					t.Fatalf("event %s/%s: score %g, the parts' sum %g", key, ev.ID, got, want)
				}
				if ev.Label != 0 {
					teach(key, x, ev.Label, false)
				} else {
					waiting[key+"/"+ev.ID] = x
				}
			}
			alone := 0
			for key, a := range takes {
				info, ok, err := w.Inspect(key)
				if err != nil || !ok || info.Follows != "" || info.PopulationWeight != nil || info.SharedPart == nil || *info.SharedPart != (a == 1) {
					t.Fatalf("key %s (share %g) inspected: %+v, %v, %v", key, a, info, ok, err)
				}
				if a == 0 {
					alone++
				}
			}
			turned := 0 // keys born taking the shared part that left it while young
			for key, a := range takes {
				if born[key] == 1 && a == 0 {
					turned++
				}
			}
			if c.apart != (alone > 0) || c.apart != (turned > 0) {
				t.Fatalf("%d of %d keys do not take the shared part, %d of them born taking it (keys apart: %v)", alone, len(takes), turned, c.apart)
			}
			t.Logf("%d of %d keys learn alone (%d turned to it while young); prior %.3f", alone, len(takes), turned, prior)
			if w.Totals().FollowedPopulation != 0 {
				t.Fatalf("%d predictions followed the population", w.Totals().FollowedPopulation)
			}
			a, _ := shared.MarshalBinary()
			b, _ := w.keys[keyed.PopulationKey].Learner().MarshalBinary()
			if !bytes.Equal(a, b) {
				t.Fatal("the shared part differs from the one replayed by hand")
			}
			for key, l := range own {
				a, _ := l.MarshalBinary()
				b, _ := w.keys[key].Learner().MarshalBinary()
				if !bytes.Equal(a, b) {
					t.Fatalf("key %s's part differs from the one replayed by hand", key)
				}
			}
		})
	}
}

func mustVec(t *testing.T, v []float64) learners.Vector {
	t.Helper()
	x, err := learners.NewDense(v)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// Learners that cannot be a part of a sum are refused by name.
func TestAdditiveNeedsASummand(t *testing.T) {
	for _, c := range []struct {
		learner string
		ok      bool
	}{{"logreg", true}, {"perceptron", true}, {"sop-ss", true}, {"winnow2", false}, {"budget-perceptron", false}} {
		cfg := additiveConfig(t, c.learner, "")
		err := cfg.Validate()
		if c.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), fmt.Sprintf("learner %s cannot be one part of a sum", c.learner))) {
			t.Errorf("%s: %v", c.learner, err)
		}
	}
}

// A sampler that is one part of a sum asks by the sum's margin: every
// emitted query probability is a/(a + |score|) of the emitted score.
func TestAdditiveSamplerAsksByTheSum(t *testing.T) {
	cfg := additiveConfig(t, "lasec-ss", `{"a":0.3}`)
	w, err := NewWorker(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range run(t, w, records(6, 1500, 5)) {
		if o.Kind != OutPrediction {
			continue
		}
		var p topics.Prediction
		if err := json.Unmarshal(o.Value, &p); err != nil || p.QueryProb == nil {
			t.Fatalf("prediction %s: %v", o.Value, err)
		}
		if want := 0.3 / (0.3 + math.Abs(p.Score)); math.Abs(*p.QueryProb-want) > 1e-12 {
			t.Fatalf("query_prob %g at score %g, want %g", *p.QueryProb, p.Score, want)
		}
		n++
	}
	if n < 1000 {
		t.Fatalf("%d predictions", n)
	}
}
