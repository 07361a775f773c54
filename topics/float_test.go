package topics

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// numberInputs are n numbers as JSON writers print them: shortest
// round-trip forms of random float64s (what Go and JavaScript write), 17
// significant digits (Python's json.dumps of many values, printf %.17g),
// fixed decimals, integers near 2^53 and 2^64, and random digit strings of
// up to 20 digits with random exponents over float64's whole range.
func numberInputs(r *rand.Rand, n int) []string {
	out := make([]string, 0, n)
	for len(out) < n {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		switch r.IntN(7) {
		case 0:
			out = append(out, strconv.FormatFloat(f, 'g', -1, 64))
		case 1:
			out = append(out, strconv.FormatFloat(f, 'e', 16, 64))
		case 2:
			out = append(out, strconv.FormatFloat(r.NormFloat64()*math.Pow(10, float64(r.IntN(12)-4)), 'g', 17, 64))
		case 3:
			out = append(out, strconv.FormatFloat((r.Float64()-0.5)*float64(r.IntN(1_000_000)), 'f', r.IntN(12), 64))
		case 4:
			out = append(out, strconv.FormatUint(1<<53+uint64(r.IntN(1000))-500, 10), strconv.FormatUint(math.MaxUint64-uint64(r.IntN(1000)), 10))
		default:
			var b strings.Builder
			if r.IntN(2) == 0 {
				b.WriteByte('-')
			}
			digits := 1 + r.IntN(20)
			point := r.IntN(digits + 1)
			for d := range digits {
				if d == point && d > 0 {
					b.WriteByte('.')
				}
				c := byte('0' + r.IntN(10))
				if d == 0 && c == '0' && point != 1 { // JSON: no leading zero but "0."
					c = '1' + byte(r.IntN(9))
				}
				b.WriteByte(c)
			}
			if r.IntN(3) > 0 {
				b.WriteString("e" + strconv.Itoa(r.IntN(660)-340))
			}
			out = append(out, b.String())
		}
	}
	return out
}

// numberPrefix gives strconv.ParseFloat's value, bit for bit, and the
// number's length, for every number it takes; and it takes almost all the
// numbers JSON writers print. 2,000,000 numbers (200,000 with -short).
func TestNumberPrefixMatchesStrconv(t *testing.T) {
	n := 2_000_000
	if testing.Short() {
		n = 200_000
	}
	r := rand.New(rand.NewPCG(1, 1))
	taken, seventeen, seventeenTaken := 0, 0, 0
	for _, s := range numberInputs(r, n) {
		want, err := strconv.ParseFloat(s, 64)
		l, got, ok := numberPrefix([]byte(s + ","))
		if !ok {
			continue
		}
		taken++
		if err != nil || math.Float64bits(got) != math.Float64bits(want) || l != len(s) {
			t.Fatalf("%s: %v (%#x) of %d bytes; strconv %v (%#x), %v", s, got, math.Float64bits(got), l, want, math.Float64bits(want), err)
		}
	}
	for _, s := range numberInputs(rand.New(rand.NewPCG(2, 2)), n/10) {
		if strings.Contains(s, "e") || len(strings.TrimLeft(strings.ReplaceAll(strings.TrimPrefix(s, "-"), ".", ""), "0")) != 17 {
			continue
		}
		seventeen++
		if _, _, ok := numberPrefix([]byte(s)); ok {
			seventeenTaken++
		}
	}
	t.Logf("%d of %d numbers taken (the others go to strconv); %d of %d plain 17-digit decimals", taken, n, seventeenTaken, seventeen)
	if taken < n*8/10 || seventeenTaken < seventeen*99/100 {
		t.Fatalf("the fast path took %d of %d numbers, %d of %d 17-digit decimals", taken, n, seventeenTaken, seventeen)
	}
}

// numberPrefix takes the numbers number would scan, and leaves the rest —
// more than 19 significant digits, values beyond the normal range, exact
// ties, malformed starts — to the general path.
func TestNumberPrefixEdges(t *testing.T) {
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
		{"9007199254740992", 16, 9007199254740992, true}, // 2^53: Eisel–Lemire
		{"0.1234567890123456 ", 18, 0.1234567890123456, true},
		{"0.12345678901234567", 19, 0.12345678901234567, true},
		{"-3.4567890123456789e-5", 22, -3.4567890123456789e-5, true},
		{"1e23", 0, 0, false}, // 5^23 has 54 bits: an exact tie, strconv's to break
		{"1e22", 4, 1e22, true},
		{"1E5", 3, 1e5, true},
		{"1.5e+3", 6, 1500, true},
		{"1.7976931348623157e308", 22, math.MaxFloat64, true},
		{"2.2250738585072014e-308", 23, 2.2250738585072014e-308, true}, // the smallest normal
		{"0.0000000000000000000001", 24, 1e-22, true},
		{"123456789012345678", 18, 123456789012345678, true},
		{"-0", 2, math.Copysign(0, -1), true},
		{"0e-5", 4, 0, true},
		{"12345678901234567890", 0, 0, false}, // 20 significant digits
		{"1e309", 0, 0, false},                // beyond float64: strconv's range error
		{"4.9e-324", 0, 0, false},             // subnormal
		{"9007199254740993", 0, 0, false},     // 2^53+1: exactly halfway
		{"1e", 0, 0, false},
		{"1e+", 0, 0, false},
		{"1.", 0, 0, false},
		{"1.]", 0, 0, false},
		{".5", 0, 0, false},
		{"-", 0, 0, false},
		{"-x", 0, 0, false},
		{"", 0, 0, false},
	} {
		n, v, ok := numberPrefix([]byte(tc.in))
		if n != tc.n || math.Float64bits(v) != math.Float64bits(tc.v) || ok != tc.ok {
			t.Errorf("%q: %d, %v, %v; want %d, %v, %v", tc.in, n, v, ok, tc.n, tc.v, tc.ok)
		}
	}
}
