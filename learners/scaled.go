package learners

import (
	"math"

	"gonum.org/v1/gonum/floats"
)

// scaledVec stores a weight vector as w = s·v so that global rescalings
// (shrinking, renormalizing) cost O(1) instead of O(d) (docs/spec/ALGORITHMS.md §1.4). It
// also tracks ‖v‖² incrementally so that learners that need ‖w‖ stay O(nnz).
type scaledVec struct {
	s       float64
	v       []float64
	norm    bool    // maintain sqn (costs two multiplies per touched entry)
	sqn     float64 // ‖v‖², maintained incrementally when norm is set, recomputed exactly on fold
	rescale int     // rescalings since the last fold

	// Lazy clearing (lazyReset): the coordinates written since the last
	// reset, so that a reset costs what the writes cost, not O(d).
	lazy    bool
	dirty   []int32
	isDirty []bool
}

// foldEvery and foldLog bound how far s may drift from 1 before it is folded
// into v: every 10⁴ rescalings or when |log s| > 300.
const (
	foldEvery = 10000
	foldLog   = 300
)

// newScaledVec returns w = 0 of dimension d; norm asks for ‖w‖ tracking.
func newScaledVec(d int, norm bool) scaledVec {
	return scaledVec{s: 1, v: make([]float64, d), norm: norm}
}

// lazyReset makes reset cost O(entries written since the last reset) instead
// of O(d), for vectors that are reset often (Dynamic ODM's short epochs).
func (w *scaledVec) lazyReset() {
	w.lazy = true
	w.isDirty = make([]bool, len(w.v))
}

// markDirty records the coordinates of x as written.
func (w *scaledVec) markDirty(x Vector) {
	if x.idx == nil {
		if len(w.dirty) < len(w.v) { // dense input: everything is dirty
			w.dirty = w.dirty[:0]
			for i := range w.v {
				w.isDirty[i] = true
				w.dirty = append(w.dirty, int32(i))
			}
		}
		return
	}
	for _, i := range x.idx {
		if !w.isDirty[i] {
			w.isDirty[i] = true
			w.dirty = append(w.dirty, i)
		}
	}
}

// dot returns w·x.
func (w *scaledVec) dot(x Vector) float64 { return w.s * dot(w.v, x) }

// add sets w ← w + c·x in O(nnz), keeping ‖v‖² current.
func (w *scaledVec) add(c float64, x Vector) {
	c /= w.s
	if w.lazy {
		w.markDirty(x)
	}
	if !w.norm {
		axpy(w.v, c, x)
		return
	}
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

// addKnown sets w ← w + c·x like add, but updates ‖v‖² in O(1) from
// vx = v·x and xx = ‖x‖², which the caller already has:
// ‖v + c'x‖² = ‖v‖² + 2c'(v·x) + c'²‖x‖². Rounding drift in the tracked norm
// is removed at every fold.
func (w *scaledVec) addKnown(c float64, x Vector, vx, xx float64) {
	c /= w.s
	axpy(w.v, c, x)
	w.sqn += 2*c*vx + c*c*xx
	if w.lazy {
		w.markDirty(x)
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

// reset sets w = 0: O(d), or O(entries written since the last reset) when lazy.
func (w *scaledVec) reset() {
	if w.lazy && len(w.dirty) < len(w.v)/2 {
		for _, i := range w.dirty {
			w.v[i], w.isDirty[i] = 0, false
		}
	} else {
		clear(w.v)
		if w.lazy {
			clear(w.isDirty)
		}
	}
	w.dirty = w.dirty[:0]
	w.s, w.sqn, w.rescale = 1, 0, 0
}

// set makes w a copy of u.
func (w *scaledVec) set(u []float64) {
	copy(w.v, u)
	w.s, w.rescale = 1, 0
	w.sqn = floats.Dot(w.v, w.v)
	if w.lazy {
		w.dirty = w.dirty[:0]
		for i := range w.isDirty {
			w.isDirty[i] = true
			w.dirty = append(w.dirty, int32(i))
		}
	}
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

// encode writes the state; the dirty set is not state (it only makes resets
// cheaper), so a restored vector starts with every nonzero marked dirty.
func (w *scaledVec) encode(e *encoder) {
	e.f64(w.s)
	e.f64s(w.v)
	e.f64(w.sqn)
	e.int(w.rescale)
}

func (w *scaledVec) decode(d *decoder, dim int) scaledVec {
	out := scaledVec{s: d.f64(), v: d.f64s(dim), norm: w.norm, sqn: d.f64(), rescale: d.int()}
	if w.lazy && d.err() == nil {
		out.lazyReset()
		for i, v := range out.v {
			if v != 0 {
				out.isDirty[i] = true
				out.dirty = append(out.dirty, int32(i))
			}
		}
	}
	return out
}
