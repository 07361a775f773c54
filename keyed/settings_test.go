package keyed

import (
	"encoding/json"
	"testing"

	"github.com/driftstream/driftstream/topics"
)

// goldenConfig is the configuration of testdata/keystate-v1.golden's keys:
// a sampler with detectors (one resets the learner, so keys carry rare
// counters), standardized inputs and delayed labels, so that every section
// of a key state is present.
func goldenConfig(t testing.TB) Settings {
	cfg := testSettings(t, "lasec-ss", `{"a":0.5}`)
	cfg.Detectors = []DetectorSpec{{Detector: "adwin", Signal: SignalMistakes}, {Detector: "ddm", Signal: SignalMistakes}, {Detector: "hddm-a", Signal: SignalScore}}
	cfg.OnDrift = OnDriftReset
	cfg.Standardize = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// dim is the tests' input dimension.
const dim = 4

// testSettings are the settings the tests build on: the pipeline tests'
// (pipeline's testConfig).
func testSettings(t testing.TB, learner, params string) Settings {
	t.Helper()
	vec, err := topics.NewVectorizer(dim, 0)
	if err != nil {
		t.Fatal(err)
	}
	return Settings{Learner: learner, Params: json.RawMessage(params), Seed: 7, Vector: vec, QueryScale: 1, MaxPending: 50, PendingTTL: 400}
}

// testModel is a model of s without a population model.
func testModel(t testing.TB, s Settings) *Model {
	t.Helper()
	m, err := New(s, nil, &Totals{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
