package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/topics"
)

// scaled is one key's labeled events in units of 1e6, with an offset.
func scaled(n int) []Record {
	r := rand.New(rand.NewPCG(6, 6))
	var out []Record
	for i := range n {
		x := []float64{1e6 * (3 + r.NormFloat64()), 1e6 * r.NormFloat64(), 1e6 * r.NormFloat64(), 1e6 * r.NormFloat64()}
		y := 1
		if x[0]-3e6+x[1] < 0 {
			y = -1
		}
		xs, _ := json.Marshal(x)
		out = append(out, Record{Offset: int64(i), Key: []byte("k"), Value: fmt.Appendf(nil, `{"id":"e%d","x":%s,"label":%d}`, i, xs, y)})
	}
	return out
}

// Inputs in units of 1e6 overshoot ODM's constant step: without the step
// guard or standardization every update is refused (a dead letter naming
// the cure), with the guard (the default) none is; standardized, the key
// learns, and a crash and restore midway changes nothing.
func TestStandardizedKeysLearnAtAnyScale(t *testing.T) {
	recs := scaled(2000)
	guarded, _ := NewWorker(testConfig(t, "odm", ""), 0)
	run(t, guarded, recs)
	if tot := guarded.Totals(); tot.Rejected != 0 {
		t.Fatalf("with the step guard, %d of 2000 refused", tot.Rejected)
	}
	cfg := testConfig(t, "odm", `{"step_guard":0}`)
	raw, _ := NewWorker(cfg, 0)
	var reason string
	for _, o := range run(t, raw, recs) {
		if o.Kind == OutDeadLetter {
			reason = o.Headers["error"]
		}
	}
	if tot := raw.Totals(); tot.Rejected < 1990 || !strings.Contains(reason, "standardize the inputs") {
		t.Fatalf("unscaled: %d of 2000 refused, want nearly all, with the cure named: %q", tot.Rejected, reason)
	}

	cfg.Standardize = true
	ref, err := NewWorker(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := run(t, ref, recs)
	tot := ref.Totals()
	if tot.Rejected != 0 || tot.DeadLetters != 0 || float64(tot.Mistakes)/float64(tot.Labeled) > 0.1 {
		t.Fatalf("standardized: %d dead letters, %d mistakes in %d", tot.DeadLetters, tot.Mistakes, tot.Labeled)
	}

	a, _ := NewWorker(cfg, 0)
	got := run(t, a, recs[:777])
	b := restarted(t, a, recs[:777])
	got = append(got, run(t, b, recs[777:])...)
	differing := 0
	for i := range want {
		if i >= len(got) || !bytes.Equal(got[i].Value, want[i].Value) {
			differing++
		}
	}
	if differing != 0 || len(got) != len(want) {
		t.Fatalf("after a restore: %d of %d outputs differ (%d outputs)", differing, len(want), len(got))
	}
	if !bytes.Equal(states(t, b)["k"], states(t, ref)["k"]) {
		t.Fatal("the restored key's state differs")
	}

	hashed, _ := topics.NewVectorizer(0, 8)
	cfg.Vector = hashed
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "dense") {
		t.Fatalf("standardize with hashed inputs: %v", err)
	}
}
