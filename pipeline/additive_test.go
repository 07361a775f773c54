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

// Every prediction of the additive model is the sum of the shared part's
// and the key's margins, as they stood when the event came; a label teaches
// both parts at that sum; a new key's own part starts at zero, so its first
// prediction is the shared part's. Replayed by hand with two learners per
// key, outside the pipeline, the same records end in the same states bit
// for bit and the same scores.
func TestAdditiveModelIsTheSumOfItsParts(t *testing.T) {
	for _, c := range []struct{ learner, params string }{{"logreg", ""}, {"perceptron", ""}, {"lasec", ""}} {
		t.Run(c.learner, func(t *testing.T) {
			cfg := additiveConfig(t, c.learner, c.params)
			recs := records(4, 2500, 9)
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
			waiting := map[string]learners.Vector{}
			sum := func(key string, x learners.Vector) float64 {
				a, _ := shared.Predict(x)
				b, _ := own[key].Predict(x)
				return a.Score + b.Score
			}
			teach := func(key string, x learners.Vector, y int) {
				m := sum(key, x)
				if err := own[key].LearnSum(x, y, m); err != nil {
					t.Fatal(err)
				}
				if err := shared.LearnSum(x, y, m); err != nil {
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
						teach(key, x, ev.Label)
					}
					continue
				}
				if own[key] == nil {
					own[key] = mk(key)
					a, _ := shared.Predict(mustVec(t, ev.X))
					if got := scores[key+"/"+ev.ID]; got != a.Score {
						t.Fatalf("key %s's first score %g, the shared part's %g", key, got, a.Score)
					}
				}
				x := mustVec(t, ev.X)
				if got, want := scores[key+"/"+ev.ID], sum(key, x); got != want {
					t.Fatalf("event %s/%s: score %g, the parts' sum %g", key, ev.ID, got, want)
				}
				if ev.Label != 0 {
					teach(key, x, ev.Label)
				} else {
					waiting[key+"/"+ev.ID] = x
				}
			}
			// The key API reports no mixture: the key adds both parts.
			if info, ok, err := w.Inspect("k1"); err != nil || !ok || info.Follows != "" || info.PopulationWeight != nil {
				t.Fatalf("key k1 inspected: %+v, %v, %v", info, ok, err)
			}
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
