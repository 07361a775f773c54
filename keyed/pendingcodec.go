package keyed

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/driftstream/driftstream/internal/wire"
	"github.com/driftstream/driftstream/learners"
)

// The awaited events' section of a key state since version 10 (codec.go):
// each event's fields together, each relative to the event before it, so
// that a key with many events awaiting their labels (late labels, labels
// that never come) writes a few bytes for each instead of some 32. A key
// rewrites its awaited events at every checkpoint of the key while they
// wait, which made them most of a late-label changelog's bytes.
//
//	uvarint P, P × awaited    oldest first:
//	  byte flags              bits 0–5 as version 6's (queried, kept for the
//	                          population alone, the experts' labels present,
//	                          the key learner's +1, the population's +1,
//	                          sourced); bit 6 a decided label is known, bit 7
//	                          it is +1 (else −1)
//	  uvarint s, bytes        the id: the previous event's id's first s bytes
//	                          (0 for the first event), then these
//	  varint                  the offset less the previous event's (the
//	                          first's: less 0)
//	  bytes vector            as version 6's (empty, then uvarint the stored
//	                          values: a sourced input not held)
//	  uvarint t               the event's time (versions 1 to 9 wrote the
//	                          Unix epoch as none): 0 none; 1 its Unix
//	                          nanoseconds follow, varint; else t − 2 is twice
//	                          the zig-zag of its distance from the previous
//	                          event's time (0 for the first event, and when
//	                          the previous one had none), plus 1 when that
//	                          distance is counted in milliseconds (a whole
//	                          number of them), in nanoseconds otherwise
//
// Each event's bytes depend on it and the event before it alone, so a key
// keeps its changelog encoding of its awaited events between checkpoints
// (awaitedCache) and writes again only the events that came or lost their
// neighbour since. The decided prediction's margin, which versions 1 to 9
// wrote as a float per event, is gone: nothing read it.

// Flags of an awaited event (the decided section's byte before version 10).
const (
	awaitQueried        = 1 << 0
	awaitPopulationOnly = 1 << 1
	awaitExperts        = 1 << 2
	awaitOwnPositive    = 1 << 3
	awaitPopPositive    = 1 << 4
	awaitSourced        = 1 << 5
	awaitDecided        = 1 << 6 // since version 10
	awaitDecidedPos     = 1 << 7 // since version 10
)

// compactAwaited is the first key-state version whose awaited events are
// written by appendAwaited.
const compactAwaited = 10

// flags are bits 0–5 of the awaited event's flags byte, as every version
// since 6 writes them; version 10's entry adds the decided label's bits 6
// and 7 (awaitedWriter.entry).
func (p *pending) flags() byte {
	f := boolByte(p.queried)*awaitQueried | boolByte(p.populationOnly)*awaitPopulationOnly | boolByte(p.sourced)*awaitSourced
	if p.population != 0 {
		f |= awaitExperts | boolByte(p.own > 0)*awaitOwnPositive | boolByte(p.population > 0)*awaitPopPositive
	}
	return f
}

// setFlags sets what bits 0–5 of flags say.
func (p *pending) setFlags(f byte) {
	p.queried, p.populationOnly, p.sourced = f&awaitQueried != 0, f&awaitPopulationOnly != 0, f&awaitSourced != 0
	if f&awaitExperts != 0 {
		p.own, p.population = sign8(f&awaitOwnPositive != 0), sign8(f&awaitPopPositive != 0)
	}
}

// appendAwaited appends the awaited events' section of version 10 (above)
// to b; omit leaves sourced inputs out (a changelog record).
func appendAwaited(b []byte, pend []pending, omit bool) []byte {
	b = binary.AppendUvarint(b, uint64(len(pend)))
	var w awaitedWriter
	for i := range pend {
		b = w.entry(b, &pend[i], omit)
	}
	return b
}

// awaitedWriter writes the awaited events' entries, each relative to the
// one before it, which it remembers.
type awaitedWriter struct {
	prevID               string
	prevOffset, prevTime int64
}

// follow makes p the event the next entry is relative to.
func (w *awaitedWriter) follow(p *pending) {
	w.prevID, w.prevOffset, w.prevTime = p.id, p.offset, 0
	if !p.ts.IsZero() {
		w.prevTime = p.ts.UnixNano()
	}
}

// entry appends p's entry; omit leaves a sourced input out.
func (w *awaitedWriter) entry(b []byte, p *pending, omit bool) []byte {
	f := p.flags()
	if p.decided != 0 {
		f |= awaitDecided | boolByte(p.decided > 0)*awaitDecidedPos
	}
	b = append(b, f)
	s := sharedPrefix(w.prevID, p.id)
	b = binary.AppendUvarint(b, uint64(s))
	b = wire.AppendString(b, p.id[s:])
	b = binary.AppendVarint(b, p.offset-w.prevOffset)
	b = p.appendHeld(b, omit)
	b = appendTime(b, p.ts, w.prevTime)
	w.follow(p)
	return b
}

// appendTime appends t's entry of the awaited section, relative to the
// previous event's time (prev; 0 when none).
func appendTime(b []byte, t time.Time, prev int64) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	ns := t.UnixNano()
	d := int64(uint64(ns) - uint64(prev)) // wraps: the decoder adds it back the same way
	var u uint64
	if d%int64(time.Millisecond) == 0 {
		u = zigzag(d/int64(time.Millisecond))<<1 | 1 // < 2^55: no overflow
	} else if z := zigzag(d); z < 1<<62 {
		u = z << 1
	} else { // more than 146 years from the previous time, and not whole milliseconds
		return binary.AppendVarint(append(b, 1), ns)
	}
	return binary.AppendUvarint(b, u+2)
}

// readTime reads appendTime's entry, relative to prev: the time (zero for
// none) and what the next entry is relative to (0 for none).
func readTime(r *wire.Reader, prev int64) (time.Time, int64) {
	var ns int64
	switch u := r.Uvarint(); {
	case u == 0:
		return time.Time{}, 0
	case u == 1:
		ns = r.Varint()
	default:
		d := unzigzag((u - 2) >> 1)
		if (u-2)&1 == 1 {
			d *= int64(time.Millisecond)
		}
		ns = int64(uint64(prev) + uint64(d))
	}
	return time.Unix(0, ns).UTC(), ns
}

// readAwaited reads the awaited events' section of version 10 (above) into
// ks, in the order written.
func (m *Model) readAwaited(r *wire.Reader, ks *State) error {
	n := r.Uvarint()
	var prevID string
	var prevOffset, prevTime int64
	for i := uint64(0); i < n && r.Err == nil; i++ {
		f := r.Byte()
		s, suffix := r.Uvarint(), r.View()
		if r.Err != nil || s > uint64(len(prevID)) || f&awaitDecidedPos != 0 && f&awaitDecided == 0 {
			r.Fail("awaited event")
			break
		}
		q := pending{id: prevID[:s] + string(suffix), offset: prevOffset + r.Varint()}
		if err := m.readInput(r, &q, compactAwaited); err != nil {
			return err
		}
		q.setFlags(f)
		if f&awaitDecided != 0 {
			q.decided = int(sign8(f&awaitDecidedPos != 0))
		}
		if q.missing && !q.sourced || q.sourced && !q.hasX { // an input left out is a sourced one
			r.Fail("awaited event's input")
			break
		}
		q.ts, prevTime = readTime(r, prevTime)
		prevID, prevOffset = q.id, q.offset
		ks.waiting().await(q, math.MaxInt, nil) // as checkpointed: within the bounds then; a replay tracks sourced inputs
	}
	return nil
}

// readInput reads an awaited event's input into q, as appendHeld wrote it:
// a vector, or (since version 4) an empty one and the count of stored
// values of a sourced input the state does not hold, whose offset a
// restore collecting missing inputs (CollectMissing) notes.
func (m *Model) readInput(r *wire.Reader, q *pending, version int) error {
	xb := r.View()
	if len(xb) == 0 && version >= 4 && r.Err == nil {
		q.hasX, q.missing, q.nnz = true, true, int32(min(r.Uvarint(), math.MaxInt32))
		if m.collect {
			m.missing.offsets = append(m.missing.offsets, q.offset)
		}
		return nil
	}
	var x learners.Vector
	if err := x.UnmarshalBinary(xb); err != nil && r.Err == nil {
		return fmt.Errorf("pending %q: %v: %w", q.id, err, errState)
	}
	q.keep(x)
	return nil
}

// sharedPrefix is the length of the longest common prefix of a and b.
func sharedPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// zigzag maps a signed value to an unsigned one, small magnitudes to small
// values (encoding/binary's varint mapping).
func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// unzigzag is zigzag's inverse.
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }
