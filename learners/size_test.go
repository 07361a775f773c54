package learners

import (
	"encoding/json"
	"errors"
	"testing"
)

// StateBytes bounds every learner's snapshot over a long run (budget stores
// filled, every candidate written) and is not a wild overestimate: within
// 2× + 1 KiB of the largest snapshot seen.
func TestStateBytesBoundsSnapshots(t *testing.T) {
	for _, c := range allCases() {
		t.Run(c.String(), func(t *testing.T) {
			bound, err := StateBytes(c.name, json.RawMessage(c.params), c.dim)
			if err != nil {
				t.Fatal(err)
			}
			l := c.build(t, 1, "k")
			largest := len(snapshot(t, l))
			s := c.stream(1, 1500)
			for i := range s.xs {
				p, err := l.Predict(s.xs[i])
				if err != nil {
					t.Fatal(err)
				}
				if p = l.Decide(p); p.Query {
					if err := l.Learn(s.xs[i], s.ys[i], p); err != nil {
						t.Fatal(err)
					}
				}
				if i%50 == 0 {
					largest = max(largest, len(snapshot(t, l)))
				}
			}
			largest = max(largest, len(snapshot(t, l)))
			if int64(largest) > bound {
				t.Fatalf("snapshot of %d bytes exceeds the bound %d", largest, bound)
			}
			// The budget's bound assumes dense stored examples: only dense
			// streams can come near it.
			if bound > 2*int64(largest)+1024 && !(c.name == "budget-perceptron" && s.xs[0].Sparse()) {
				t.Fatalf("bound %d is loose: largest snapshot %d bytes", bound, largest)
			}
		})
	}
}

// The bound is computed without allocating the state: a full-covariance
// learner over 2^16 features is sized (17 GB: a packed triangle) in no time,
// and bad names or parameters give New's errors.
func TestStateBytesWithoutAllocating(t *testing.T) {
	b, err := StateBytes("lasec-ss", nil, 1<<16)
	if err != nil || b < 1<<34 {
		t.Fatalf("lasec-ss at 2^16: %d bytes, %v", b, err)
	}
	if allocs := testing.AllocsPerRun(3, func() { StateBytes("lasec", nil, 1<<16) }); allocs > 200 {
		t.Fatalf("%v allocations", allocs)
	}
	if _, err := StateBytes("no-such", nil, 3); !errors.Is(err, ErrUnknownLearner) {
		t.Fatal(err)
	}
	if _, err := StateBytes("lasec", json.RawMessage(`{"q":1}`), 3); !errors.Is(err, ErrParam) {
		t.Fatal(err)
	}
	wm, _ := StateBytes("weighted-majority", json.RawMessage(`{"members":[{"name":"lasec"},{"name":"perceptron"}]}`), 10)
	lasec, _ := StateBytes("lasec", nil, 10)
	if wm <= lasec {
		t.Fatalf("ensemble %d ≤ its member %d", wm, lasec)
	}
}
