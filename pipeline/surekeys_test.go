package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/driftstream/driftstream/topics"
)

// New keys keep learning after the shared part grew sure of a separable
// concept: once the sum's margin on an input is in the hundreds, a new
// key's first slope is too small to square, and the shipped learner once
// divided by the 0 it left in the accumulators (infinite weights, every
// later event of the key dead-lettered "margin is NaN"; found at 1,000,000
// keys on a real broker). Here one key teaches the shared part while a new
// key with two events comes at each step, until 100 new keys have come
// with their margin between 372 and 745 (or past 745, where slopes are
// exactly 0): no dead letter.
func TestNewKeysLearnAgainstASureSharedPart(t *testing.T) {
	w, err := NewWorker(shippedConfig(4), 0)
	if err != nil {
		t.Fatal(err)
	}
	offset := int64(0)
	process := func(key, x string) topics.Prediction {
		t.Helper()
		if err := w.Process(context.Background(), Record{Offset: offset, Key: []byte(key), Value: fmt.Appendf(nil, `{"id":"e%d","x":%s,"label":1}`, offset, x)}); err != nil {
			t.Fatal(err)
		}
		offset++
		var p topics.Prediction
		for _, o := range w.TakeOutputs() {
			switch o.Kind {
			case OutDeadLetter:
				t.Fatalf("key %q, event %d, dead-lettered: %s", key, offset-1, o.Headers["error"])
			case OutPrediction:
				if err := json.Unmarshal(o.Value, &p); err != nil {
					t.Fatal(err)
				}
			}
		}
		return p
	}
	inWindow := 0
	for i := 0; ; i++ {
		process("teacher", `[10,10,10,10]`)
		// A new key's input twice the teacher's: its margin (the shared
		// part's) twice what the teacher's labels bring the sum to.
		key := fmt.Sprintf("new-%d", i)
		first := process(key, `[20,20,20,20]`)
		if first.Score > 372 && first.Score < 745 {
			inWindow++
		}
		process(key, `[20,20,20,20]`)
		if first.Score > 745 || inWindow == 100 {
			break
		}
		if i == 20_000 {
			t.Fatalf("the shared part's margin %g after %d events: never sure", first.Score, offset)
		}
	}
	if inWindow == 0 {
		t.Fatal("no new key came while the shared margin was between 372 and 745: the test checks nothing")
	}
	t.Logf("%d new keys came while the shared margin was between 372 and 745 (%d events)", inWindow, offset)
}
