package topics

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// The hand-written encodings are encoding/json's, byte for byte, over
// random messages with awkward strings and the whole range of floats.
func TestOutputEncodingMatchesJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	strs := []string{"e-1029", "", "k<&>", "quote\"back\\slash", "tab\there\nline", "é😀", "\x00\x1f", "\u2028", "a\xffb", "entity-42"}
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e-6, 9.99e-7, 1e-7, 123456789.125, 1e20, 1e21, -3.5e-300, math.MaxFloat64, math.SmallestNonzeroFloat64}
	pick := func() float64 {
		if r.IntN(2) == 0 {
			return floats[r.IntN(len(floats))]
		}
		return (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(60)-30))
	}
	for i := 0; i < 20000; i++ {
		q := pick()
		key := strs[r.IntN(len(strs))]
		msgs := []interface{ AppendJSON([]byte) []byte }{
			Prediction{ID: strs[r.IntN(len(strs))], Key: key, KeyB64: KeyB64(key), Label: 1 - 2*r.IntN(2), Score: pick(), Learner: "lasec-ss",
				Partition: r.IntN(100), Offset: r.Int64()},
			Prediction{ID: "x", Key: "y", Label: -1, Score: pick(), Learner: "perceptron", Partition: 3, Offset: 7, QueryProb: &q},
			Prediction{ID: "x", Key: key, KeyB64: KeyB64(key), Label: 1, Score: q, Learner: "logreg", Partition: 1, Offset: 2, Posterior: &q},
			Prediction{ID: "x", Key: "y", Label: 1, Score: q, Learner: "lasec-ss", Partition: 1, Offset: 2, QueryProb: &q, Posterior: &q},
			LabelQuery{ID: strs[r.IntN(len(strs))], Key: key, KeyB64: KeyB64(key), Score: pick(), QueryProb: pick(), Partition: 1, Offset: int64(i)},
		}
		for _, m := range msgs {
			want, _ := json.Marshal(m)
			if got := m.AppendJSON(nil); !bytes.Equal(got, want) {
				t.Fatalf("%+v:\n got %s\nwant %s", m, got, want)
			}
		}
	}
}

// BenchmarkEncodePrediction compares the prediction's encodings.
//
//	go test -run '^$' -bench EncodePrediction -benchmem ./topics
func BenchmarkEncodePrediction(b *testing.B) {
	q := 0.31
	m := Prediction{ID: "event-1029384", Key: "customer-77", Label: 1, Score: -0.7312456789, Learner: "lasec-ss", Partition: 3, Offset: 123456, QueryProb: &q}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.AppendJSON(make([]byte, 0, 160))
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(m)
		}
	})
}

// Keys that are not valid UTF-8 read alike in "key" (U+FFFD for each bad
// byte) and apart, losslessly, in "key_b64"; a valid key has no key_b64.
func TestKeyB64KeepsKeysApart(t *testing.T) {
	for _, tc := range []struct {
		a, b string
	}{{"dev-\xff", "dev-\xfe"}, {"\xc3", "\xc3\x28"}} {
		var pa, pb Prediction
		json.Unmarshal(Prediction{Key: tc.a, KeyB64: KeyB64(tc.a)}.AppendJSON(nil), &pa)
		json.Unmarshal(Prediction{Key: tc.b, KeyB64: KeyB64(tc.b)}.AppendJSON(nil), &pb)
		if pa.Key != pb.Key && !strings.Contains(pa.Key, "\ufffd") {
			t.Fatalf("%q and %q: keys %q and %q; the test expects them to read alike", tc.a, tc.b, pa.Key, pb.Key)
		}
		ka, _ := base64.StdEncoding.DecodeString(pa.KeyB64)
		kb, _ := base64.StdEncoding.DecodeString(pb.KeyB64)
		if string(ka) != tc.a || string(kb) != tc.b {
			t.Fatalf("key_b64 gives %q and %q, want %q and %q", ka, kb, tc.a, tc.b)
		}
	}
	if b := (Prediction{Key: "héllo", KeyB64: KeyB64("héllo")}).AppendJSON(nil); strings.Contains(string(b), "key_b64") {
		t.Fatalf("a valid UTF-8 key has key_b64: %s", b)
	}
}
