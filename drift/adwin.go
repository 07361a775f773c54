package drift

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
)

// ADWINParams configure ADWIN.
type ADWINParams struct {
	// Delta is the confidence δ: at each check, a stream whose mean did not
	// change shrinks the window with probability at most δ (0.002).
	Delta float64 `json:"delta"`
	// Clock checks for a cut every this many values (32).
	Clock int `json:"clock"`
	// MaxBuckets is M, the buckets kept per size before two are merged (5).
	MaxBuckets int `json:"max_buckets"`
	// MinSubWindow is the fewest values on each side of a cut (5).
	MinSubWindow int `json:"min_sub_window"`
	// MinWindow is the fewest values in the window before any check (10).
	MinWindow int `json:"min_window"`
}

// bucket summarizes 2^row consecutive values: their sum and their variance
// (sum of squared deviations from their mean).
type bucket struct{ total, variance float64 }

// adwin is ADWIN2 of Bifet & Gavaldà (SDM 2007), as in MOA: an adaptive
// window of recent values, kept in an exponential histogram (rows of at
// most M+1 buckets; row i's buckets summarize 2^i values), that drops its
// oldest part whenever two sub-windows have means differing by more than
// ε_cut = √(2·m·σ²·ln(2 ln n/δ)) + (2/3)·m·ln(2 ln n/δ), with m the sum
// of the inverse sub-window lengths (less the minimum) and σ² the window's
// variance. Theorem 3.1 bounds the probability of a cut on a stationary
// stream by δ per check, and guarantees a cut when the means differ by
// more than ε_cut. The window keeps the values after a cut; a cut after
// which the window's mean rose is a drift (see Add).
type adwin struct {
	p               ADWINParams
	rows            [][]bucket // rows[0]: the newest, single values; each row oldest first
	width           int64
	total, variance float64
	ticks           int64
}

func buildADWIN(raw json.RawMessage) (Detector, error) {
	p := ADWINParams{Delta: 0.002, Clock: 32, MaxBuckets: 5, MinSubWindow: 5, MinWindow: 10}
	if err := decodeParams("adwin", raw, &p); err != nil {
		return nil, err
	}
	switch {
	case !(p.Delta > 0 && p.Delta < 1):
		return nil, paramError("adwin", "delta", p.Delta, "must be in (0, 1)")
	case p.Clock < 1:
		return nil, paramError("adwin", "clock", p.Clock, "must be ≥ 1")
	case p.MaxBuckets < 2 || p.MaxBuckets > maxADWINBuckets:
		return nil, paramError("adwin", "max_buckets", p.MaxBuckets, fmt.Sprintf("must be between 2 and %d (a key's state holds up to 64 rows of them)", maxADWINBuckets))
	case p.MinSubWindow < 1 || p.MinWindow < 2*p.MinSubWindow:
		return nil, paramError("adwin", "min_sub_window/min_window", []int{p.MinSubWindow, p.MinWindow}, "need min_sub_window ≥ 1 and min_window ≥ 2·min_sub_window")
	}
	return &adwin{p: p}, nil
}

func (d *adwin) Name() string { return "adwin" }

// maxADWINBuckets bounds max_buckets, and maxADWINRows the histogram's rows:
// row i holds buckets of 2^i values, and a window holds fewer than 2^63.
const (
	maxADWINBuckets = 64
	maxADWINRows    = 64
)

// maxBytes bounds the snapshot: the header and counters, and every row at
// its fullest (max_buckets buckets of two floats, and the row's length).
func (d *adwin) maxBytes() int {
	return 16 + 4*10 + 10 + maxADWINRows*(10+d.p.MaxBuckets*16)
}

// Width is the number of values in the window.
func (d *adwin) Width() int64 { return d.width }

// Mean is the window's mean.
func (d *adwin) Mean() float64 {
	if d.width == 0 {
		return 0
	}
	return d.total / float64(d.width)
}

// Add reports a drift when the window was cut and its mean rose: the
// values kept are worse than the ones dropped (MOA's ADWINChangeDetector).
// A cut after which the mean fell (an improvement) adapts the window
// without an alert.
func (d *adwin) Add(x float64) State {
	before := d.Mean()
	if d.cut(x) && d.Mean() > before {
		return Drift
	}
	return Stable
}

// cut adds x and reports whether the window was cut, whichever way its
// mean moved (ADWIN's two-sided test).
func (d *adwin) cut(x float64) bool {
	d.insert(x)
	d.ticks++
	if d.ticks%int64(d.p.Clock) != 0 || d.width <= int64(d.p.MinWindow) {
		return false
	}
	cut := false
	for d.cutOnce() {
		cut = true
	}
	return cut
}

func (d *adwin) insert(x float64) {
	d.width++
	if d.width > 1 {
		prev := d.total / float64(d.width-1)
		d.variance += float64(d.width-1) * (x - prev) * (x - prev) / float64(d.width)
	}
	d.total += x
	if len(d.rows) == 0 {
		d.rows = append(make([][]bucket, 0, 4), d.newRow())
	}
	d.rows[0] = append(d.rows[0], bucket{total: x})
	for i := 0; i < len(d.rows) && len(d.rows[i]) > d.p.MaxBuckets; i++ {
		b1, b2 := d.rows[i][0], d.rows[i][1]
		n := math.Ldexp(1, i) // values per bucket of row i
		u1, u2 := b1.total/n, b2.total/n
		merged := bucket{total: b1.total + b2.total, variance: b1.variance + b2.variance + n*n*(u1-u2)*(u1-u2)/(2*n)}
		d.rows[i] = append(d.rows[i][:0], d.rows[i][2:]...)
		if i+1 == len(d.rows) {
			d.rows = append(d.rows, d.newRow())
		}
		d.rows[i+1] = append(d.rows[i+1], merged)
	}
}

// newRow is an empty row with room for the MaxBuckets+1 buckets it holds
// before two merge: allocated once, where appending grew it three times to
// a capacity of 8 (a young key's windows, in the profile of 100,000 keys
// seen ten times each).
func (d *adwin) newRow() []bucket { return make([]bucket, 0, d.p.MaxBuckets+1) }

// cutOnce looks for a cut, oldest sub-window first; on one, it drops the
// oldest bucket and reports true (the caller looks again).
func (d *adwin) cutOnce() bool {
	n := float64(d.width)
	v := d.variance / n
	dd := math.Log(2 * math.Log(n) / d.p.Delta)
	minLen := float64(d.p.MinSubWindow)
	var n0, u0 float64
	n1, u1 := n, d.total
	for i := len(d.rows) - 1; i >= 0; i-- {
		size := math.Ldexp(1, i)
		for k, b := range d.rows[i] {
			if i == 0 && k == len(d.rows[i])-1 {
				return false // the newest value alone is no sub-window
			}
			n0, n1 = n0+size, n1-size
			u0, u1 = u0+b.total, u1-b.total
			if n0 <= minLen+1 || n1 <= minLen+1 {
				continue
			}
			m := 1/(n0-minLen+1) + 1/(n1-minLen+1)
			eps := math.Sqrt(2*m*v*dd) + 2.0/3.0*dd*m
			if math.Abs(u0/n0-u1/n1) > eps {
				d.dropOldest()
				return true
			}
		}
	}
	return false
}

// dropOldest removes the window's oldest bucket.
func (d *adwin) dropOldest() {
	last := len(d.rows) - 1
	b := d.rows[last][0]
	n1 := math.Ldexp(1, last)
	d.width -= int64(n1)
	d.total -= b.total
	if d.width > 0 {
		u1 := b.total / n1
		w := float64(d.width)
		d.variance -= b.variance + n1*w*(u1-d.total/w)*(u1-d.total/w)/(n1+w)
		d.variance = max(d.variance, 0)
	} else {
		d.variance = 0
	}
	d.rows[last] = d.rows[last][1:]
	for len(d.rows) > 0 && len(d.rows[len(d.rows)-1]) == 0 {
		d.rows = d.rows[:len(d.rows)-1]
	}
}

func (d *adwin) MarshalBinary() ([]byte, error) { return d.AppendBinary(nil) }

func (d *adwin) AppendBinary(b []byte) ([]byte, error) {
	w := newWriter(b, d.Name())
	return d.marshal(&w), nil
}

// marshal writes the detector's state to w.
func (d *adwin) marshal(w *writer) []byte {
	w.int(d.width)
	w.int(d.ticks)
	w.f64(d.total)
	w.f64(d.variance)
	w.int(int64(len(d.rows)))
	for _, row := range d.rows {
		w.int(int64(len(row)))
		for _, b := range row {
			w.bucket(b)
		}
	}
	return w.b
}

// Bucket flags of a version-2 snapshot: the total is a whole number,
// written as a uvarint (the mistakes signal's totals are counts); the
// variance is 0 (a bucket of equal values: every bucket of one value, and
// most of a near-perfect key's), and not written.
const (
	bucketWholeTotal = 1 << iota
	bucketNoVariance
)

// bucket writes one bucket: a flags byte, the total (a uvarint when whole,
// else a float) and the variance unless it is 0 — exact either way, so a
// restored detector goes on bit for bit. A row-0 bucket of the mistakes
// signal takes 2 bytes instead of version 1's 16.
func (w *writer) bucket(b bucket) {
	var flags byte
	whole := b.total >= 0 && b.total < 1<<53 && b.total == math.Trunc(b.total) && !math.Signbit(b.total)
	if whole {
		flags |= bucketWholeTotal
	}
	if b.variance == 0 && !math.Signbit(b.variance) {
		flags |= bucketNoVariance
	}
	w.b = append(w.b, flags)
	if whole {
		w.b = binary.AppendUvarint(w.b, uint64(b.total))
	} else {
		w.f64(b.total)
	}
	if flags&bucketNoVariance == 0 {
		w.f64(b.variance)
	}
}

// bucket reads what writer.bucket wrote (version 2), or two floats
// (version 1).
func (r *reader) bucket() bucket {
	if r.version < 2 {
		return bucket{total: r.Float64(), variance: r.Float64()}
	}
	var b bucket
	flags := r.Byte()
	if flags > bucketWholeTotal|bucketNoVariance {
		r.Fail(fmt.Sprintf("bucket flags %#x", flags))
		return b
	}
	if flags&bucketWholeTotal != 0 {
		b.total = float64(r.Uvarint())
	} else {
		b.total = r.Float64()
	}
	if flags&bucketNoVariance == 0 {
		b.variance = r.Float64()
	}
	return b
}

func (d *adwin) UnmarshalBinary(b []byte) error {
	r := newReader(d.Name(), b)
	width, ticks, total, variance := r.Varint(), r.Varint(), r.Float64(), r.Float64()
	nrows := r.Varint()
	if nrows < 0 || nrows > maxADWINRows {
		r.Fail(fmt.Sprintf("%d rows", nrows))
	}
	var rows [][]bucket
	for i := int64(0); i < nrows && r.Err == nil; i++ {
		k := r.Varint()
		if k < 0 || k > int64(d.p.MaxBuckets) {
			r.Fail(fmt.Sprintf("%d buckets in a row", k))
			break
		}
		row := make([]bucket, 0, k) // exact: a restored key may never grow again, and a million of them are restored at once
		for j := int64(0); j < k && r.Err == nil; j++ {
			row = append(row, r.bucket())
		}
		rows = append(rows, row)
	}
	if err := r.Done(); err != nil {
		return err
	}
	d.width, d.ticks, d.total, d.variance, d.rows = width, ticks, total, variance, rows
	return nil
}
