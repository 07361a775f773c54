package keyed

import (
	"math/bits"
	"slices"
)

// An awaited event's input is not written to the changelog when the events
// topic can give it back: a key's checkpoint records the event's offset,
// and a restore re-reads the events topic from the oldest such offset,
// decoding each awaited event again as its key skips it (Model.Revisit).
// Such an input is "sourced": the event's input as decoded, not
// standardized (a key's standardized input depends on the key's earlier
// inputs, which the events topic alone does not give back). A partition's
// Model tracks the offsets of its keys' sourced inputs (offsetSet), so that
// each checkpoint's marker says where such a restore starts
// (Model.OldestSourced).

// offsetSet is a set of input offsets, kept as a bitmap from the oldest
// one: adding and removing an offset costs a bit, and the oldest is found
// by scanning the words before it once. Offsets are added in about
// increasing order (the order a partition's events come in), so the bitmap
// spans the offsets between the oldest awaited event and the newest.
type offsetSet struct {
	base  int64    // the offset of bit 0 of words[0]; a multiple of 64
	words []uint64 // bit i of words[j]: offset base + 64j + i
	n     int      // offsets in the set
}

// add puts o (≥ 0) in the set.
func (s *offsetSet) add(o int64) {
	if s.n == 0 {
		s.base, s.words = o&^63, s.words[:0]
	}
	if o < s.base { // an offset before the oldest: rare (a replay), so the words move
		shift := int((s.base - o&^63) / 64)
		s.words = slices.Insert(s.words, 0, make([]uint64, shift)...)
		s.base = o &^ 63
	}
	i := int((o - s.base) / 64)
	for len(s.words) <= i {
		s.words = append(s.words, 0)
	}
	if s.words[i]&(1<<(o&63)) == 0 {
		s.words[i] |= 1 << (o & 63)
		s.n++
	}
}

// remove takes o out of the set; an offset not in it is ignored.
func (s *offsetSet) remove(o int64) {
	if o < s.base {
		return
	}
	i := int((o - s.base) / 64)
	if i >= len(s.words) || s.words[i]&(1<<(o&63)) == 0 {
		return
	}
	s.words[i] &^= 1 << (o & 63)
	s.n--
	if s.n == 0 {
		s.words = s.words[:0]
		return
	}
	// Drop the empty words in front, so that the oldest is the first word's
	// lowest bit; the slice is moved down when half of it went unused.
	j := 0
	for s.words[j] == 0 {
		j++
	}
	if j > 0 {
		s.base += int64(j) * 64
		s.words = s.words[j:]
		if cap(s.words) > 2*len(s.words)+64 {
			s.words = append(make([]uint64, 0, 2*len(s.words)), s.words...)
		}
	}
}

// oldest is the smallest offset in the set, or −1 when it is empty.
func (s *offsetSet) oldest() int64 {
	if s.n == 0 {
		return -1
	}
	return s.base + int64(bits.TrailingZeros64(s.words[0]))
}

// trimBelow takes every offset below t out of the set.
func (s *offsetSet) trimBelow(t int64) {
	if s.n == 0 || t <= s.base {
		return
	}
	j := 0
	for ; j < len(s.words) && s.base+int64(j+1)*64 <= t; j++ {
		s.n -= bits.OnesCount64(s.words[j])
	}
	if j < len(s.words) {
		below := uint64(1)<<(t-s.base-int64(j)*64) - 1
		s.n -= bits.OnesCount64(s.words[j] & below)
		s.words[j] &^= below
	}
	if s.n == 0 {
		s.words = s.words[:0]
		return
	}
	for s.words[j] == 0 {
		j++
	}
	s.base += int64(j) * 64
	s.words = s.words[j:]
}

// len is the number of offsets in the set.
func (s *offsetSet) len() int { return s.n }

// clear empties the set.
func (s *offsetSet) clear() { s.n, s.words = 0, s.words[:0] }

// Revisit is told of an events-topic record that key state ks absorbed
// before its checkpoint (a replay skips it): when the key still awaits the
// record's event with a sourced input, the partition tracks its offset
// again, and an input the key's changelog record left out is decoded from
// the record again. It reports whether ks changed (an input filled in):
// the holder then keeps ks rather than a stored copy without it. An input
// that cannot be decoded again stays missing, and its label, when it
// comes, is counted in Totals.InputsLost.
func (m *Model) Revisit(in Input, ks *State) bool {
	if in.Topic != EventsTopic || ks.wait == nil {
		return false
	}
	i, ok := ks.wait.at(in.Offset)
	if !ok || ks.wait.pending[i].id != in.Event.ID || !ks.wait.pending[i].sourced {
		return false
	}
	p := &ks.wait.pending[i]
	m.track(p.offset)
	if !p.missing {
		return false
	}
	x, err := m.s.Vector.Vector(*in.Event)
	if err != nil || int32(x.NNZ()) != p.nnz {
		return false // not the input it was: counted when its label comes
	}
	p.x, p.missing = x, false
	return true
}

// CollectMissing starts collecting the offsets of the sourced inputs that
// the key states decoded from now on do not hold (a restore from the
// changelog): those a re-read of the events topic must decode (Missing).
func (m *Model) CollectMissing() {
	m.collect = true
	m.missing.offsets, m.missing.next = m.missing.offsets[:0], 0
}

// KeepMissingFrom stops collecting, and keeps, sorted, the offsets
// collected from from on: the re-read's start.
func (m *Model) KeepMissingFrom(from int64) {
	m.collect = false
	o := m.missing.offsets
	slices.Sort(o)
	o = slices.Compact(o)
	i, _ := slices.BinarySearch(o, from)
	m.missing.offsets = o[i:]
}

// Missing reports whether a key state decoded between CollectMissing and
// KeepMissingFrom lacks the sourced input of the event at offset o: the
// records a re-read passes over without decoding are those it does not
// report. It is asked about offsets in increasing order.
func (m *Model) Missing(o int64) bool {
	ms := &m.missing
	for ms.next < len(ms.offsets) && ms.offsets[ms.next] < o {
		ms.next++
	}
	return ms.next < len(ms.offsets) && ms.offsets[ms.next] == o
}

// ForgetMissing drops the collected offsets (the re-read is done).
func (m *Model) ForgetMissing() { m.missing = missingInputs{} }

// missingInputs are the offsets CollectMissing collected, in increasing
// order once collected, and the first one not yet passed (Missing).
type missingInputs struct {
	offsets []int64
	next    int
}

// track adds the offset of an awaited event's sourced input, and forgets
// those more than PendingTTL before it: a label that comes later for one of
// those finds it expired (Model.expire), so its input is never read again.
func (m *Model) track(o int64) {
	m.sourced.add(o)
	m.sourced.trimBelow(o - m.s.PendingTTL)
}

// OldestSourced is the offset of the oldest awaited event whose input the
// changelog records leave out, −1 when there is none: where a restore
// re-reads the events topic from (checkpoint.Marker.Reread counts back to
// it).
func (m *Model) OldestSourced() int64 { return m.sourced.oldest() }

// ForgetSourced empties the tracked offsets, for a holder whose keys are
// replaced (a restore): the replay that follows tracks them again
// (Revisit).
func (m *Model) ForgetSourced() { m.sourced.clear() }
