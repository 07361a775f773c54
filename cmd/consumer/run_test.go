package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// The main job on the embedded broker: every demo event is processed and
// predicted, queries are answered by the demo producer, and the final JSON
// line has the promised fields.
func TestEmbeddedDemo(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"-embedded", "-embedded-addr", "127.0.0.1:0", "-demo-events", "3000", "-demo-keys", "20",
		"-learner", "lasec-ss", "-params", `{"a":0.2}`, "-checkpoint-every", "200"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var sum map[string]float64
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("stdout %q: %v", out.String(), err)
	}
	for _, k := range []string{"events", "predictions", "label_queries", "labels_joined", "dead_letters", "accuracy", "events_per_sec"} {
		if _, ok := sum[k]; !ok {
			t.Fatalf("summary lacks %q: %s", k, out.String())
		}
	}
	if sum["events"] < 3000 || sum["predictions"] != sum["events"] || sum["label_queries"] == 0 || sum["accuracy"] < 0.55 {
		t.Fatalf("summary %s", out.String())
	}
	if !strings.Contains(errb.String(), "embedded Kafka broker listening on 127.0.0.1:") {
		t.Fatalf("stderr %q", errb.String())
	}
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		frag string
	}{
		{[]string{"-learner", "lasec"}, "no brokers"},
		{[]string{"-brokers", "x:1", "-learner", "nope", "-dim", "3"}, `unknown learner "nope"`},
		{[]string{"-brokers", "x:1", "-dim", "3", "-demo-events", "5"}, "-demo-events needs -embedded"},
		{[]string{"-brokers", "x:1"}, "dimension"},
		{[]string{"-embedded", "-brokers", "x:1"}, "exclude each other"},
	}
	for _, tc := range tests {
		var errb bytes.Buffer
		if code := run(tc.args, &bytes.Buffer{}, &errb); code != exitUsage || !strings.Contains(errb.String(), tc.frag) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errb.String(), tc.frag)
		}
	}
}
