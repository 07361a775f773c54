package topics

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"
)

// numberPrefix converts the JSON number at the start of b, correctly
// rounded (the float64 nearest its value, ties to even: strconv.ParseFloat's
// result, bit for bit), scanning it once. n is the number's length. ok is
// false when b does not start with a number it takes — malformed, more than
// 19 significant digits, a value beyond float64's normal range, or one of
// the rare inputs the fast algorithm cannot round with certainty — and the
// caller then scans it in full, with its errors, and asks strconv.
//
// Two paths: when the digits are an integer below 2^53 and the power of ten
// is at most 22 in size, both are exact float64s and one IEEE operation
// rounds correctly (Clinger's fast path, strconv's own); otherwise the
// Eisel–Lemire algorithm multiplies the digits by a 128-bit approximation
// of the power of ten and checks that the truncation cannot change the
// rounding (D. Lemire, "Number parsing at a gigabyte per second", Software:
// Practice and Experience 51(8), 2021).
func numberPrefix(b []byte) (n int, v float64, ok bool) {
	i, neg := 0, false
	if len(b) > 0 && b[0] == '-' {
		neg, i = true, 1
	}
	start := i
	var mant uint64
	if i < len(b) && b[i] == '0' {
		i++ // a leading zero stands alone, as in number
	} else {
		for ; i < len(b) && b[i]-'0' <= 9; i++ { // b[i]-'0' wraps above 9 below '0'
			mant = mant*10 + uint64(b[i]-'0') // wraps past 19 digits: see significant
		}
	}
	if i == start {
		return 0, 0, false
	}
	digits, exp10 := i-start, 0
	if i < len(b) && b[i] == '.' {
		i++
		f := i
		for ; i < len(b) && b[i]-'0' <= 9; i++ {
			mant = mant*10 + uint64(b[i]-'0')
		}
		if i == f {
			return 0, 0, false
		}
		exp10 = f - i
		digits += i - f
	}
	if digits > 19 && significant(b[start:i]) > 19 {
		return 0, 0, false
	}
	if i < len(b) && b[i]|0x20 == 'e' {
		i++
		eneg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			eneg = b[i] == '-'
			i++
		}
		e, f := 0, i
		for ; i < len(b) && b[i]-'0' <= 9; i++ {
			if e < 100_000 { // beyond any float64; kept from overflowing
				e = e*10 + int(b[i]-'0')
			}
		}
		if i == f {
			return 0, 0, false
		}
		if eneg {
			e = -e
		}
		exp10 += e
	}
	switch {
	case mant == 0:
		v = 0
	case mant < 1<<53 && exp10 >= -22 && exp10 <= 22:
		if v = float64(mant); exp10 < 0 {
			v /= pow10[-exp10]
		} else {
			v *= pow10[exp10]
		}
	default:
		if v, ok = eiselLemire(mant, exp10); !ok {
			return 0, 0, false
		}
	}
	if neg {
		v = -v
	}
	return i, v, true
}

// significant is the number of significant digits of the decimal digits
// (with at most one '.') in b: all but the leading zeros.
func significant(b []byte) int {
	n, lead := 0, true
	for _, c := range b {
		if c == '.' || lead && c == '0' {
			continue
		}
		lead = false
		n++
	}
	return n
}

// The powers of ten eiselLemire holds: beyond them every nonzero mantissa
// of up to 19 digits underflows or overflows float64.
const (
	minPow10 = -348
	maxPow10 = 347
)

// pow10Mantissa holds, for each q in [minPow10, maxPow10], 10^q's first 128
// bits, rounded down: hi has its top bit set, and 10^q = (hi·2^64 + lo + ε)
// · 2^(e), 0 ≤ ε < 1, for an e that eiselLemire computes. Built once, from
// exact arithmetic.
var pow10Mantissa = func() (t [maxPow10 - minPow10 + 1][2]uint64) {
	ten := big.NewInt(10)
	for q := minPow10; q <= maxPow10; q++ {
		var m big.Int
		if q >= 0 {
			m.Exp(ten, big.NewInt(int64(q)), nil)
			if l := m.BitLen(); l > 128 {
				m.Rsh(&m, uint(l-128))
			} else {
				m.Lsh(&m, uint(128-l))
			}
		} else {
			var d big.Int
			d.Exp(ten, big.NewInt(int64(-q)), nil)
			// 2^(L+127) / d lies in [2^127, 2^128) for d in [2^(L-1), 2^L).
			m.Lsh(big.NewInt(1), uint(d.BitLen()+127))
			m.Quo(&m, &d)
		}
		var w [16]byte
		m.FillBytes(w[:])
		t[q-minPow10] = [2]uint64{binary.BigEndian.Uint64(w[:8]), binary.BigEndian.Uint64(w[8:])}
	}
	return t
}()

// eiselLemire is mant·10^exp10 rounded to the nearest float64 (ties to
// even), for mant > 0; false when exp10 is out of the table's range, the
// result is not a normal float64, or the 128-bit product cannot tell which
// way to round.
func eiselLemire(mant uint64, exp10 int) (float64, bool) {
	if exp10 < minPow10 || exp10 > maxPow10 {
		return 0, false
	}
	zeros := bits.LeadingZeros64(mant)
	mant <<= uint(zeros)
	pow := &pow10Mantissa[exp10-minPow10]
	// The product's binary exponent: floor(log2(10^exp10)) (217706/2^16 ≈
	// log2(10)), plus the 64 bits of the shifted mantissa, biased.
	exp2 := uint64(217706*exp10>>16+64+1023) - uint64(zeros)
	hi, lo := bits.Mul64(mant, pow[0])
	// The first 64 bits of the power left 9 undetermined bits in hi when all
	// of them are ones and lo may carry: take the next 64.
	if hi&0x1ff == 0x1ff && lo+mant < mant {
		hi2, lo2 := bits.Mul64(mant, pow[1])
		mergedHi, mergedLo := hi, lo+hi2
		if mergedLo < lo {
			mergedHi++
		}
		if mergedHi&0x1ff == 0x1ff && mergedLo+1 == 0 && lo2+mant < mant {
			return 0, false // still undetermined
		}
		hi, lo = mergedHi, mergedLo
	}
	top := hi >> 63 // the product has 127 or 128 bits
	m := hi >> (top + 9)
	exp2 -= 1 ^ top
	if lo == 0 && hi&0x1ff == 0 && m&3 == 1 {
		return 0, false // exactly halfway, as far as these bits tell
	}
	m += m & 1 // round the 54 bits to 53, half up (a true tie was refused above)
	m >>= 1
	if m>>53 > 0 { // rounding carried into a new bit
		m >>= 1
		exp2++
	}
	if exp2-1 >= 0x7ff-1 { // subnormal, zero, or beyond the largest float64
		return 0, false
	}
	return math.Float64frombits(exp2<<52 | m&(1<<52-1)), true
}
