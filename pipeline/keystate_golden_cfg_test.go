package pipeline

import "testing"

// goldenConfig is the configuration of testdata/keystate-v1.golden's keys:
// a sampler with detectors (one resets the learner, so keys carry rare
// counters), standardized inputs and delayed labels, so that every section
// of a key state is present.
func goldenConfig(t *testing.T) Config {
	cfg := testConfig(t, "lasec-ss", `{"a":0.5}`)
	cfg.Detectors = []DetectorSpec{{Detector: "adwin", Signal: SignalMistakes}, {Detector: "ddm", Signal: SignalMistakes}, {Detector: "hddm-a", Signal: SignalScore}}
	cfg.OnDrift = OnDriftReset
	cfg.Standardize = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}
