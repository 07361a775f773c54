package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBacktestCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"backtest", "-data", "synth:switching-gaussian?T=2000&d=5&period=400", "-learners", "perceptron,lasec,perceptron-ss",
		"-params", `{"lasec":{"c":20}}`, "-repeats", "2", "-query-rate-target", "0.3", "-out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var sum struct {
		Events   int `json:"events"`
		Learners []struct {
			Name      string          `json:"name"`
			Params    json.RawMessage `json:"params"`
			QueryRate float64         `json:"query_rate"`
		} `json:"learners"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("summary.json: %v", err)
	}
	var lasecParams map[string]float64
	json.Unmarshal(sum.Learners[1].Params, &lasecParams)
	if sum.Events != 2000 || len(sum.Learners) != 3 || lasecParams["c"] != 20 {
		t.Fatalf("summary %s", b)
	}
	// Calibrated on repeat 0; repeat 1 re-draws the stream, so the mean wanders a little.
	if q := sum.Learners[2].QueryRate; q < 0.25 || q > 0.35 || !strings.Contains(string(sum.Learners[2].Params), `"b"`) {
		t.Fatalf("perceptron-ss not calibrated: rate %v params %s", q, sum.Learners[2].Params)
	}
	if !strings.Contains(out.String(), "lasec") || !strings.Contains(errb.String(), "repeat 2/2") {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
}

func TestBacktestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		frag string
	}{
		{[]string{"-learners", "perceptron", "-out", dir}, "-data is required"},
		{[]string{"-data", "synth:sea", "-out", dir}, "-learners is required"},
		{[]string{"-data", "synth:sea", "-learners", "perceptron"}, "-out is required"},
		{[]string{"-data", "synth:sea", "-learners", "percepton", "-out", dir}, `unknown learner "percepton"`},
		{[]string{"-data", "synth:nope", "-learners", "perceptron", "-out", dir}, "valid generators"},
		{[]string{"-data", "synth:sea?x=1", "-learners", "perceptron", "-out", dir}, `unknown parameter "x"`},
		{[]string{"-data", "synth:sea", "-learners", "lasec", "-params", `{"lasec":{"q":1}}`, "-out", dir}, `unknown parameter "q"`},
		{[]string{"-data", "synth:sea", "-learners", "lasec", "-params", `{"sop":{}}`, "-out", dir}, "not in -learners"},
		{[]string{"-data", "synth:sea", "-learners", "lasec", "-query-rate-target", "1.5", "-out", dir}, "query-rate-target"},
		{[]string{"-data", "data.parquet", "-learners", "lasec", "-out", dir}, "-format"},
		{[]string{"-data", "x.csv", "-learners", "lasec", "-label", "last", "-out", dir}, "positive"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var errb bytes.Buffer
			if code := run(append([]string{"backtest"}, tc.args...), &bytes.Buffer{}, &errb); code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), tc.frag) {
				t.Fatalf("stderr %q lacks %q", errb.String(), tc.frag)
			}
		})
	}
}
