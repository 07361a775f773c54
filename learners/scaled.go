package learners

import (
	"math"

	"gonum.org/v1/gonum/floats"
)

// scaledVec stores a weight vector as w = s·v so that global rescalings
// (shrinking, renormalizing) cost O(1) instead of O(d) (ALGORITHMS §1.4). It
// also tracks ‖v‖² incrementally so that learners that need ‖w‖ stay O(nnz).
type scaledVec struct {
	s       float64
	v       []float64
	sqn     float64 // ‖v‖², maintained incrementally, recomputed exactly on fold
	rescale int     // rescalings since the last fold
}

// foldEvery and foldLog bound how far s may drift from 1 before it is folded
// into v: every 10⁴ rescalings or when |log s| > 300.
const (
	foldEvery = 10000
	foldLog   = 300
)

func newScaledVec(d int) scaledVec { return scaledVec{s: 1, v: make([]float64, d)} }

// dot returns w·x.
func (w *scaledVec) dot(x Vector) float64 { return w.s * dot(w.v, x) }

// add sets w ← w + c·x in O(nnz), keeping ‖v‖² current.
func (w *scaledVec) add(c float64, x Vector) {
	c /= w.s
	if x.idx == nil {
		for i, xv := range x.val {
			old := w.v[i]
			nv := old + c*xv
			w.sqn += nv*nv - old*old
			w.v[i] = nv
		}
		return
	}
	for k, i := range x.idx {
		old := w.v[i]
		nv := old + c*x.val[k]
		w.sqn += nv*nv - old*old
		w.v[i] = nv
	}
}

// scale sets w ← f·w in O(1); f = 0 clears w (O(d), the only way to reach 0).
func (w *scaledVec) scale(f float64) {
	if f == 0 {
		w.reset()
		return
	}
	w.s *= f
	w.rescale++
	if w.rescale >= foldEvery || math.Abs(math.Log(math.Abs(w.s))) > foldLog {
		w.fold()
	}
}

// reset sets w = 0.
func (w *scaledVec) reset() {
	clear(w.v)
	w.s, w.sqn, w.rescale = 1, 0, 0
}

// set makes w a copy of u.
func (w *scaledVec) set(u []float64) {
	copy(w.v, u)
	w.s, w.rescale = 1, 0
	w.sqn = floats.Dot(w.v, w.v)
}

// fold multiplies s into v and recomputes ‖v‖² exactly.
func (w *scaledVec) fold() {
	if w.s != 1 {
		floats.Scale(w.s, w.v)
	}
	w.s, w.rescale = 1, 0
	w.sqn = floats.Dot(w.v, w.v)
}

// sqNorm is ‖w‖².
func (w *scaledVec) sqNorm() float64 { return w.s * w.s * w.sqn }

// dense returns w as a new slice.
func (w *scaledVec) dense() []float64 {
	out := make([]float64, len(w.v))
	floats.ScaleTo(out, w.s, w.v)
	return out
}

func (w *scaledVec) encode(e *encoder) {
	e.f64(w.s)
	e.f64s(w.v)
	e.f64(w.sqn)
	e.int(w.rescale)
}

func (w *scaledVec) decode(d *decoder, dim int) scaledVec {
	return scaledVec{s: d.f64(), v: d.f64s(dim), sqn: d.f64(), rescale: d.int()}
}
