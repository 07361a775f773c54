package topics

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// The exact fast path gives strconv's value, bit for bit, and the number's
// length, wherever it applies.
func TestExactMatchesStrconv(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	applied := 0
	for i := 0; i < 300000; i++ {
		v := (r.Float64() - 0.5) * float64(r.IntN(1000000))
		s := strconv.FormatFloat(v, 'f', r.IntN(12), 64)
		want, _ := strconv.ParseFloat(s, 64)
		if n, got, ok := exactPrefix([]byte(s + ",")); ok {
			applied++
			if got != want || math.Signbit(got) != math.Signbit(want) || n != len(s) {
				t.Fatalf("%s: %v of %d bytes, strconv %v", s, got, n, want)
			}
		}
	}
	if applied < 100000 {
		t.Fatalf("the fast path applied to only %d numbers", applied)
	}
}

// exactPrefix takes the numbers number would scan, and leaves the rest —
// exponents, too many digits, malformed starts — to the general path.
func TestExactPrefixEdges(t *testing.T) {
	for _, tc := range []struct {
		in string
		n  int
		v  float64
		ok bool
	}{
		{"0.5,", 3, 0.5, true},
		{"-0.25]", 5, -0.25, true},
		{"01", 1, 0, true}, // number stops after a leading zero too; the caller finds the '1'
		{"9007199254740991}", 16, 9007199254740991, true},
		{"0.1234567890123456 ", 18, 0.1234567890123456, true},
		{"9007199254740992", 0, 0, false}, // 2^53
		{"123456789012345678", 0, 0, false},
		{"0.0000000000000000000001", 0, 0, false},
		{"1e5", 0, 0, false},
		{"1.5E-3", 0, 0, false},
		{"1.", 0, 0, false},
		{"1.]", 0, 0, false},
		{".5", 0, 0, false},
		{"-", 0, 0, false},
		{"-x", 0, 0, false},
		{"", 0, 0, false},
	} {
		n, v, ok := exactPrefix([]byte(tc.in))
		if n != tc.n || v != tc.v || ok != tc.ok {
			t.Errorf("%q: %d, %v, %v; want %d, %v, %v", tc.in, n, v, ok, tc.n, tc.v, tc.ok)
		}
	}
	if _, v, _ := exactPrefix([]byte("-0")); !math.Signbit(v) {
		t.Error("-0 lost its sign")
	}
}
