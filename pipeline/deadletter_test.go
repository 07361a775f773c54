package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/topics"
)

// fits reports the bytes of o as a batch of one, and whether that is within
// its kind's limit.
func fits(o Output, l OutputLimits) (int, bool) {
	n := BatchOverhead + RecordBytes(len(o.Key), len(o.Value), o.Headers)
	return n, n <= l.Of(o.Kind)
}

// poison is one random record that the pipeline must turn into a dead
// letter, or process, without failing: keys and values of random sizes up
// to twice the limit, malformed in the ways a producer's bug makes them.
func poison(r *rand.Rand, limit int) (key, value []byte) {
	size := func() int { // mostly small, sometimes around or over the limit
		switch r.IntN(4) {
		case 0:
			return r.IntN(2 * limit)
		case 1:
			return limit - 200 + r.IntN(400)
		default:
			return r.IntN(64)
		}
	}
	key = bytes.Repeat([]byte{'k'}, max(1, size()))
	if r.IntN(3) > 0 {
		key = []byte(fmt.Sprintf("key-%d", r.IntN(50)))
	}
	long := strings.Repeat("9", max(1, size()))
	switch r.IntN(7) {
	case 0:
		value = []byte(`{"id":"p","x":[` + long + `]}`) // a number too long to parse
	case 1:
		value = []byte(`{"id":"p","` + strings.Repeat("f", len(long)) + `":1}`) // an unknown field
	case 2:
		value = []byte(`{"id":"p","ts":"` + long + `","x":[1,2,3,4]}`) // a long ts
	case 3:
		value = []byte(`{"id":"p","label":"` + long + `"}`) // a string where a number goes
	case 4:
		value = bytes.Repeat([]byte{'{'}, len(long)) // not JSON at all
	case 5:
		value = []byte(`{"id":"p-` + strconv.Itoa(r.IntN(1e6)) + `","x":[1,2,3,4],"label":1}`) // a valid event, perhaps under a long key
	default:
		value = make([]byte, len(long)) // random bytes
		for i := range value {
			value[i] = byte(r.UintN(256))
		}
	}
	return key, value
}

// No record stops a partition, and every output fits its topic: random keys
// and values up to twice the limit, malformed in every way, mixed with good
// events. Each good event is predicted once; each poison record becomes one
// dead letter (or, valid under a short enough key, one prediction); dead
// letters carry their reason, a bounded error, and when cut, the original's
// size and hash.
func TestNoRecordStopsThePartitionAndEveryOutputFits(t *testing.T) {
	for _, limit := range []int{DefaultMaxMessageBytes, 64 << 10} {
		t.Run(strconv.Itoa(limit), func(t *testing.T) {
			cfg := testConfig(t, "lasec", "")
			cfg.Outputs = OutputLimits{Predictions: limit, Queries: limit, DeadLetters: limit, Alerts: limit}
			w, err := NewWorker(cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(29, uint64(limit)))
			good := records(3, 600, 5)
			var all []Record
			var poisoned []Record
			for _, g := range good {
				all = append(all, g)
				if r.IntN(3) == 0 {
					k, v := poison(r, limit)
					all = append(all, Record{Key: k, Value: v})
					poisoned = append(poisoned, all[len(all)-1])
				}
			}
			for i := range all {
				all[i].Offset = int64(i)
			}
			byOffset := map[int64]Record{}
			for _, rec := range all {
				byOffset[rec.Offset] = rec
			}
			outs := run(t, w, all)
			dead, over := 0, 0
			for _, o := range outs {
				if n, ok := fits(o, cfg.Outputs); !ok {
					over++
					t.Errorf("a %s output of %d bytes, over the limit of %d", o.Kind, n, limit)
				}
				if o.Kind != OutDeadLetter {
					continue
				}
				dead++
				h := o.Headers
				src := byOffset[o.Source.Offset]
				if h["reason"] == "" || len(h["error"]) > MaxErrorHeaderBytes || h["offset"] != strconv.FormatInt(src.Offset, 10) {
					t.Fatalf("dead letter at %d: reason %q, error of %d bytes, offset %q", o.Source.Offset, h["reason"], len(h["error"]), h["offset"])
				}
				if len(src.Key) > w.cfg.MaxKeyLength && h["reason"] != ReasonKeyTooLong {
					t.Fatalf("a key of %d bytes dead-lettered as %q", len(src.Key), h["reason"])
				}
				if h["truncated"] != "" {
					sum := sha256.Sum256(src.Value)
					if h["original-value-sha256"] != hex.EncodeToString(sum[:]) || h["original-value-bytes"] != strconv.Itoa(len(src.Value)) ||
						!bytes.HasPrefix(src.Value, o.Value) || !bytes.HasPrefix(src.Key, o.Key) {
						t.Fatalf("a cut dead letter does not describe its original: %v", h)
					}
				} else if !bytes.Equal(o.Key, src.Key) || !bytes.Equal(o.Value, src.Value) {
					t.Fatalf("an uncut dead letter differs from its original")
				}
			}
			preds := map[string]int{}
			for _, o := range outs {
				if o.Kind == OutPrediction {
					var m topics.Prediction
					if err := json.Unmarshal(o.Value, &m); err != nil {
						t.Fatal(err)
					}
					preds[m.ID]++
				}
			}
			missing, repeated := 0, 0
			for _, g := range good {
				if ev, _ := topics.Decode(g.Value, 0); ev.Kind == topics.Input {
					switch preds[ev.ID] {
					case 0:
						missing++
					case 1:
					default:
						repeated++
					}
				}
			}
			// Each poison record has exactly one output: its dead letter, or
			// (a valid event under a short enough key) its prediction.
			perSource := map[int64]int{}
			for _, o := range outs {
				if o.Kind == OutDeadLetter || o.Kind == OutPrediction {
					perSource[o.Source.Offset]++
				}
			}
			wrongCount := 0
			for _, p := range poisoned {
				if perSource[p.Offset] != 1 {
					wrongCount++
				}
			}
			if missing != 0 || repeated != 0 || over != 0 || int64(dead) != w.Totals().DeadLetters || wrongCount != 0 {
				t.Fatalf("%d good events missing, %d repeated, %d outputs over the limit; %d dead letters (counted %d); %d of %d poison records without exactly one output",
					missing, repeated, over, dead, w.Totals().DeadLetters, wrongCount, len(poisoned))
			}
			if w.Totals().KeyTooLong == 0 || w.Totals().InvalidEvent == 0 {
				t.Fatalf("the draw covered no long key or no invalid event: %+v", w.Totals())
			}
		})
	}
}

// A key longer than MaxKeyLength is dead-lettered with its reason and gets
// no state; one at the bound is a key like any other.
func TestKeyLengthBound(t *testing.T) {
	cfg := testConfig(t, "perceptron", "")
	cfg.MaxKeyLength = 100
	w, err := NewWorker(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	ev := []byte(`{"id":"a","x":[1,2,3,4],"label":1}`)
	outs := run(t, w, []Record{{Offset: 0, Key: bytes.Repeat([]byte{'a'}, 101), Value: ev}, {Offset: 1, Key: bytes.Repeat([]byte{'b'}, 100), Value: ev}})
	if len(outs) != 2 || outs[0].Kind != OutDeadLetter || outs[0].Headers["reason"] != ReasonKeyTooLong || outs[1].Kind != OutPrediction {
		t.Fatalf("outputs %+v", outs)
	}
	if len(outs[0].Key) != 100 || outs[0].Headers["original-key-bytes"] != "101" {
		t.Fatalf("the dead letter's key is %d bytes (headers %v), want cut to the bound, naming the original's size", len(outs[0].Key), outs[0].Headers)
	}
	if st := w.Totals(); w.Keys() != 1 || st.KeyTooLong != 1 || st.DeadLetters != 1 || st.Events != 1 {
		t.Fatalf("%d keys, totals %+v: want the long key without state", w.Keys(), st)
	}
}

// A configuration whose outputs could exceed a topic's limit is refused at
// start with the figures; the default bounds fit Kafka's default limit.
func TestValidateRefusesOutputsThatCannotFit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits OutputLimits
		keyLen int
		ok     bool
	}{
		{"defaults", OutputLimits{}, 0, true},
		{"predictions 16 KiB", OutputLimits{Predictions: 16 << 10}, 0, false},
		{"predictions 16 KiB, keys of 1 KiB", OutputLimits{Predictions: 16 << 10}, 1 << 10, true},
		{"dead letters 4 KiB", OutputLimits{DeadLetters: 4 << 10}, 0, false},
		{"queries 20 KiB", OutputLimits{Queries: 20 << 10}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "perceptron", "")
			cfg.Outputs, cfg.MaxKeyLength = tc.limits, tc.keyLen
			err := cfg.Validate()
			if (err == nil) != tc.ok || (err != nil && (!errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "DRIFTSTREAM_MAX_KEY_LENGTH"))) {
				t.Fatalf("Validate: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// A record refused by the dead letter's own topic limit is cut to fit it:
// the smallest limit Validate accepts still takes the longest key with its
// headers.
func TestDeadLetterOutputFitsTheSmallestLimit(t *testing.T) {
	cfg := testConfig(t, "perceptron", "")
	cfg.MaxKeyLength = DefaultMaxKeyLength
	limit := BatchOverhead + RecordOverhead + cfg.MaxKeyLength + deadLetterHeadroom
	d := DeadLetter{Reason: ReasonInvalidEvent, Err: errors.New(strings.Repeat("e", 1<<20)), SourceTopic: strings.Repeat("t", 249),
		Offset: 1 << 60, Key: bytes.Repeat([]byte{'k'}, 1<<20), Value: bytes.Repeat([]byte{'v'}, 1<<20),
		Extra: map[string]string{"output-kind": OutPrediction, "output-topic": strings.Repeat("o", 249)}}
	o := d.Output(limit, cfg.MaxKeyLength)
	if n, ok := fits(o, OutputLimits{DeadLetters: limit}); !ok || len(o.Key) != cfg.MaxKeyLength {
		t.Fatalf("%d bytes with a key of %d, want within %d with the key cut to %d", n, len(o.Key), limit, cfg.MaxKeyLength)
	}
}

// A restore that meets key states of another learner configuration (a new
// learner, parameters or dimension) refuses with ErrLearnerChanged, naming
// the count and what to do, instead of rebuilding every key from the input
// (which dropped operator resets, one warning per key); the same
// configuration restores as before.
func TestRestoreRefusesAnotherLearnerConfiguration(t *testing.T) {
	w, err := NewWorker(testConfig(t, "shifting-perceptron", ""), 0)
	if err != nil {
		t.Fatal(err)
	}
	run(t, w, records(5, 300, 7))
	store := checkpoint.NewMemoryStore()
	if _, _, err := w.Checkpoint(context.Background(), store); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, learner, params string
		bias, refused         bool
	}{
		{"same", "shifting-perceptron", "", false, false},
		{"other learner", "lasec", "", false, true},
		{"other parameters", "shifting-perceptron", `{"lambda":0.1}`, false, true},
		{"bias input turned on (DRIFTSTREAM_BIAS)", "shifting-perceptron", "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, tc.learner, tc.params)
			if tc.bias {
				cfg.Vector = cfg.Vector.WithBias()
			}
			r, err := NewWorker(cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Restore(context.Background(), store)
			if refused := errors.Is(err, ErrLearnerChanged); refused != tc.refused || (!refused && err != nil) {
				t.Fatalf("restore: %v, want refused=%v", err, tc.refused)
			}
			if tc.refused && (!strings.Contains(err.Error(), "7 keys") || !strings.Contains(err.Error(), "DRIFTSTREAM_CHANGELOG_TOPIC") || r.Keys() != 0) {
				t.Fatalf("restore: %v, %d keys held", err, r.Keys())
			}
		})
	}
}
