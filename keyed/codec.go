package keyed

// The key-state codec: what a key's checkpoint record (checkpoint.KeyRecord's
// State) holds, in one place. Integers are Go's binary varints (uvarint for
// counts and lengths, zig-zag varint for signed values); "bytes" is a uvarint
// length then that many bytes; floats are 8 bytes, IEEE 754 little endian.
//
// Version 11 (written since 29 November 2026, by a shared part across
// partitions: Settings.SharedAcrossPartitions) is version 10 followed by
// version 7's peers and awaited events below; every other state is written
// as version 10.
//
// Version 10 (written since 29 November 2026) is version 8 with the awaited
// events' section of pendingcodec.go in place of version 6's "pending"
// (each event's id, offset and input) and without its "decided" section
// (each event's decided label, margin, flags and time): the events' fields
// together, each relative to the event before it, about 12 bytes an event
// instead of 32, and no margin (nothing read it).
//
// Version 9 (written on 29 November 2026, by a shared part across
// partitions) is version 8 followed by version 7's peers and awaited events
// below; every other state was written as version 8 then.
//
// Version 8 (written on 29 November 2026) is version 6 where the
// mixture's byte may also be 2 (the weights are exactly 1 for the
// population and 0 for the key's learner: the additive model's key that
// takes the shared part) or 3 (exactly 0 and 1: a key that learns alone),
// with no floats after it: the additive model's one-bit choice in a byte
// instead of 17.
//
// Version 7 (written on 29 November 2026, by a shared part across
// partitions) is version 6 followed by
//
//	uvarint N, N × peer       the other partitions the shared part absorbed
//	                          records of (peer.go), by partition: uvarint
//	                          partition, varint the last offset absorbed of
//	                          its events topic and of its labels topic (−1:
//	                          none; not both)
//	uvarint W, W × awaited    the other partitions' events awaiting their
//	                          label, oldest first: uvarint partition, varint
//	                          offset, bytes key, bytes id, bytes vector
//
// Every other state was written as version 6 then.
//
// Version 6 (written on 29 November 2026):
//
//	0x00 0x06                 header: a zero byte (no version-1 state starts
//	                          with one: its first field, a snapshot's length,
//	                          is never 0), then the version
//	byte, 8 bytes, bytes      the learner's snapshot (learners, versioned)
//	                          without its identity, which every key of the
//	                          model shares (learners.SplitSnapshot): its
//	                          format version, the FNV-1a 64-bit hash of its
//	                          identity (name, dimension, parameters as the
//	                          snapshot's header holds them; a state of
//	                          another configuration is refused, wrapping
//	                          learners.ErrConfiguration), then its body
//	bytes                     the margin rule's RNG (math/rand/v2 PCG)
//	uvarint P, P × pending    events awaiting their label, oldest first:
//	                          bytes id, varint offset, bytes vector; an
//	                          empty vector (a sourced input the state does
//	                          not hold, flag bit 5 below) is followed by
//	                          uvarint the input's stored values
//	uvarint E, E × early      labels-topic labels ahead of their event:
//	                          bytes id, varint label (±1), varint offset
//	P × decided               per pending event, in order: varint decided
//	                          label (±1), float score, byte flags (bit 0
//	                          queried, bit 1 its input is kept for the
//	                          population model alone, bit 2 the experts'
//	                          labels follow in bit 3, the key's learner's,
//	                          and bit 4, the population's: 1 for +1; bit
//	                          5 the input is sourced: the events topic
//	                          gives it back at the offset, and a
//	                          changelog record leaves it out),
//	                          varint event time (Unix ns; 0: none)
//	watch                     the drift detectors: uvarint D, D × bytes
//	                          detector snapshot (drift, versioned); D ×
//	                          (varint events since its alert, byte 1 when
//	                          it alerted); byte S, the signals whose
//	                          windows follow (bit 0 mistakes, 1 queries, 2
//	                          score), per set bit: byte full, the blocks
//	                          completed (bit 7 set: byte next follows,
//	                          the oldest block of the ring; else next is
//	                          full), byte the count of the block being
//	                          filled, [byte next], full × 4 bytes the
//	                          completed blocks' sums (float32, the ring's
//	                          first full places; the others are 0), and
//	                          when the count is not 0, 4 bytes the block
//	                          being filled (incident.go); uvarint I incidents, I × (byte
//	                          phase: 0 none, 1 candidate, 2 open, bit 7 a
//	                          floor follows: varint quiet events, 3 × float;
//	                          when the phase is not 0: uvarint detector,
//	                          varint detections, quiet events, opened
//	                          offset; per signal (mistakes, queries, score):
//	                          float reference, float level, varint the
//	                          reference's size, varint values seen; byte the signals rising, 3 × byte the
//	                          detector per signal)
//	stats                     varint events, labeled, mistakes, resets;
//	                          uvarint last alert's detector (index + 1, 0:
//	                          none), then when > 0 varint its offset and
//	                          varint its event time (Unix ns)
//	bytes                     the input statistics (learners.Standardizer;
//	                          empty: not standardized)
//	mixture                   byte 0 (none) or 1, then float the population's
//	                          weight and float the key's learner's
//	                          (population.go); with the additive model, the
//	                          key's share of the shared part (1 or 0) and 1
//	                          minus it (additive.go)
//
// A vector is in the vector codec's layout (learners.Vector's
// AppendBinary): uvarint dimension, byte sparse (0/1), uvarint entries,
// then per entry (sparse: uvarint index) and float value.
//
// A key's changelog record (State.MarshalChangelog) leaves every sourced
// input out: a restore re-reads them from the events topic (sourced.go);
// the key store's record (State.MarshalBinary) holds those it has.
//
// Version 5 (written on 29 November 2026) is version 6 with the learner's
// whole snapshot as bytes (identity included).
//
// Version 4 (written on 29 November 2026) is version 5 with each signal's
// windows written whole: 20 × 4 bytes block sums (float32, a ring), 4
// bytes the block being filled, byte next, byte full, byte its count.
//
// Version 3 (written from 28 to 29 November 2026) is version 4 where every
// pending event's vector is written, and no flag has bit 5.
//
// Version 2 (written from November 2026 to 28 November 2026) is version 3
// with a watch of D × (varint events since its alert, byte flags: bit 0
// alerted, bit 1 a drift awaits its alert), then varint labeled, varint
// mistakes, varint recent count (≤ 64), 8 bytes recent outcomes; it is
// read with the windows empty and no incident open.
//
// Version 1 (written before) is version 2 without the header, and
// each section from "decided" on may be missing, with every later one: a
// state that ends early was written before those sections existed
// (pending events without "decided" count as queried, unscored). A decoder
// reads both; a state of a later version is refused with its number.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/internal/wire"
	"github.com/driftstream/driftstream/learners"
)

// stateVersion is the key-state format MarshalBinary writes; a state
// without peers is written as peerlessVersion.
const (
	stateVersion    = 11
	peerlessVersion = 10
)

// hasPeers reports whether a key state of version v ends with peers.
func hasPeers(v int) bool { return v == 7 || v == 9 || v == 11 }

// The mixture's flags (codec's doc): none, two floats follow, and since
// version 8 the weights 1 and 0, or 0 and 1, without floats.
const (
	mixtureNone byte = iota
	mixtureWeights
	mixtureShared
	mixtureOwn
)

// errState reports a key state that cannot be decoded.
var errState = errors.New("bad key state")

// MarshalBinary writes the key's whole state in the current format
// (stateVersion), every awaited event's input it holds included: the key
// store's record. It keeps the encoding of each awaited event's input for
// the next call (the bytes written are the same): like every method of
// State, it is not for concurrent use.
func (ks *State) MarshalBinary() ([]byte, error) { return ks.marshal(false) }

// MarshalChangelog writes the key's state as its changelog record holds
// it: MarshalBinary's, less the sourced inputs of the events awaiting
// their label, which a restore re-reads from the events topic.
func (ks *State) MarshalChangelog() ([]byte, error) { return ks.marshal(true) }

// HoldsSourced reports whether the key holds an awaited event's sourced
// input: then its changelog record (MarshalChangelog) is not its key-store
// record (MarshalBinary).
func (ks *State) HoldsSourced() bool {
	for i := range ks.pending() {
		if p := &ks.wait.pending[i]; p.sourced && !p.missing {
			return true
		}
	}
	return false
}

// marshal is MarshalBinary, or with omit MarshalChangelog.
func (ks *State) marshal(omit bool) ([]byte, error) {
	// Sized for the events awaiting their labels and the usual rest, so
	// that the buffer grows at most once or twice.
	size := 512
	for _, p := range ks.pending() {
		// Per stored value 8 bytes and a sparse index's varint: the
		// values, not the dimension, which a sparse input's hashed space
		// makes millions.
		size += len(p.id) + 64
		if !p.sourced || !omit {
			size += 13 * int(p.nnz)
		}
	}
	return ks.appendState(make([]byte, 0, size), omit, nil, 0)
}

// AppendChangelog appends ks's changelog record (State.MarshalChangelog's
// bytes) to b, and AppendState its key-store record (State.MarshalBinary's).
// Keys of the model share their learner's identity, which the model hashed
// once: a checkpoint, a spill or a park appends its keys to one buffer and
// hashes nothing.
func (m *Model) AppendChangelog(b []byte, ks *State) ([]byte, error) {
	return ks.appendState(b, true, m.identity, m.identityHash)
}

// AppendState: see AppendChangelog.
func (m *Model) AppendState(b []byte, ks *State) ([]byte, error) {
	return ks.appendState(b, false, m.identity, m.identityHash)
}

// appendState appends the key's state to b: MarshalBinary's, or with omit
// MarshalChangelog's. identity and its hash, when given, are what the
// learner's snapshot identity is expected to be (any other is hashed).
func (ks *State) appendState(b []byte, omit bool, identity []byte, hash uint64) ([]byte, error) {
	if ks.peers != nil {
		b = append(b, 0, stateVersion)
	} else {
		b = append(b, 0, peerlessVersion)
	}
	// The learner's snapshot without its identity, which every key of the
	// model shares: named by its hash. Appended whole, then its identity
	// replaced in place by the hash and the body's length (shorter for any
	// real identity: a name, a dimension and parameters).
	at := len(b)
	b, err := learners.AppendSnapshot(b, ks.learner)
	if err != nil {
		return nil, err
	}
	if b, err = nameIdentity(b, at, identity, hash); err != nil {
		return nil, err
	}
	var rb [32]byte // the margin rule's RNG (20 bytes)
	rng, _ := ks.query.AppendBinary(rb[:0])
	b = wire.AppendBytes(b, rng)
	if omit && ks.wait != nil {
		b = ks.wait.appendChangelog(b)
	} else {
		b = appendAwaited(b, ks.pending(), omit)
	}
	earl := ks.early()
	b = binary.AppendUvarint(b, uint64(len(earl)))
	for _, e := range earl {
		b = wire.AppendString(b, e.id)
		b = binary.AppendVarint(b, int64(e.label))
		b = binary.AppendVarint(b, e.offset)
	}
	b, err = encodeWatch(b, ks.watch)
	if err != nil {
		return nil, err
	}
	b = encodeStats(b, &ks.stats)
	var std []byte // empty: not standardized
	if ks.std != nil {
		std, _ = ks.std.MarshalBinary()
	}
	b = wire.AppendBytes(b, std)
	b = appendMixture(b, ks.mix)
	if ks.peers != nil {
		b = ks.peers.appendTo(b)
	}
	return b, nil
}

// appendMixture appends the mixture's section: its flag, and its weights
// unless they are exactly 1 and 0 or 0 and 1 (the additive model's
// choice), which the flag says.
func appendMixture(b []byte, mix *mixture) []byte {
	switch {
	case mix == nil:
		return append(b, mixtureNone)
	case mix.population == 1 && mix.own == 0 && !math.Signbit(mix.own):
		return append(b, mixtureShared)
	case mix.population == 0 && mix.own == 1 && !math.Signbit(mix.population):
		return append(b, mixtureOwn)
	}
	b = append(b, mixtureWeights)
	b = wire.AppendFloat64(b, mix.population)
	return wire.AppendFloat64(b, mix.own)
}

// decodeMixture reads the mixture's section of a key state of version
// (at least 2): false for none.
func decodeMixture(r *wire.Reader, version int) (mixture, bool) {
	flag := r.Byte()
	switch {
	case r.Err != nil || flag > mixtureOwn || version < 8 && flag > mixtureWeights:
		r.Fail("mixture")
	case flag == mixtureShared:
		return mixture{population: 1, own: 0}, true
	case flag == mixtureOwn:
		return mixture{population: 0, own: 1}, true
	case flag == mixtureWeights:
		m := mixture{population: r.Float64(), own: r.Float64()}
		if r.Err == nil && !(m.population >= 0 && m.own >= 0 && m.population+m.own > 0.99 && m.population+m.own < 1.01) {
			r.Fail("mixture weights")
		}
		return m, true
	}
	return mixture{}, false
}

// nameIdentity rewrites the learner's snapshot at b[at:], the end of b, as
// a key state holds it: its format version, the hash of its identity, and
// its body as bytes. With identity and hash given and the snapshot's
// identity equal to identity, hash is taken as its hash; any other is
// hashed. In place when the identity is at least as long as the hash and
// the body's length, as every real one is (a name, a dimension and
// parameters).
func nameIdentity(b []byte, at int, identity []byte, hash uint64) ([]byte, error) {
	start := at + 1 // after the snapshot's format version
	bodyAt := start + len(identity)
	if identity == nil || len(b) < bodyAt || !bytes.Equal(b[start:bodyAt], identity) {
		_, other, body, err := learners.SplitSnapshot(b[at:])
		if err != nil {
			return nil, err
		}
		hash, bodyAt = identityHash(other), len(b)-len(body)
	}
	var hb [8 + binary.MaxVarintLen64]byte
	head := binary.LittleEndian.AppendUint64(hb[:0], hash)
	head = binary.AppendUvarint(head, uint64(len(b)-bodyAt))
	if len(head) > bodyAt-start { // a short identity: the body moves up
		body := bytes.Clone(b[bodyAt:])
		return append(append(b[:start], head...), body...), nil
	}
	copy(b[start:], head) // the body moves down over the identity
	n := copy(b[start+len(head):], b[bodyAt:])
	return b[:start+len(head)+n], nil
}

// sign8 is +1 for true, −1 for false.
func sign8(positive bool) int8 {
	if positive {
		return 1
	}
	return -1
}

// Decode rebuilds a key from its checkpoint record, in the format of any
// version this build reads; its learner and detectors are the model's.
func (m *Model) Decode(rec *checkpoint.KeyRecord) (*State, error) {
	r := wire.NewReader(rec.State, errState)
	version := 1 // no header: the first field is the snapshot's length, never 0
	if len(r.B) >= 2 && r.B[0] == 0 {
		version = int(r.B[1])
		r.B = r.B[2:]
	}
	if version < 1 || version > stateVersion {
		return nil, fmt.Errorf("key state version %d: this build reads versions 1 to %d (a newer driftstream wrote it?): %w", version, stateVersion, errState)
	}
	var snap []byte
	if version >= 6 { // the identity left out, named by its hash
		sv, hash, body := r.Byte(), r.Uint64(), r.View()
		if r.Err == nil && hash != m.identityHash {
			return nil, fmt.Errorf("learner: the key's state was written by a learner of another name, dimension or parameters (identity %016x; this model's %016x, %s): %w: %w",
				hash, m.identityHash, m.s.Learner, learners.ErrConfiguration, learners.ErrSnapshot)
		}
		// Put together in a buffer the model reuses: the learner decodes
		// by copy.
		m.scratch = learners.JoinSnapshot(m.scratch[:0], sv, m.identity, body)
		snap = m.scratch
	} else {
		snap = r.View() // decoded at once, by copy: nothing keeps rec.State
	}
	rng := r.View()
	if r.Err != nil {
		return nil, r.Err
	}
	ks, err := m.blank(learners.Config{Dim: m.s.Vector.Dim}) // every stream comes from the record
	if err != nil {
		return nil, err
	}
	if rec.Key == PopulationKey {
		ks.watch = nil // as population made it: no detectors
	}
	if err := ks.learner.UnmarshalBinary(snap); err != nil {
		return nil, fmt.Errorf("learner: %w", err)
	}
	if err := ks.query.UnmarshalBinary(rng); err != nil {
		return nil, fmt.Errorf("query rng: %v: %w", err, errState)
	}
	if version >= compactAwaited {
		if err := m.readAwaited(r, ks); err != nil {
			return nil, err
		}
	} else {
		n := r.Uvarint()
		for i := uint64(0); i < n && r.Err == nil; i++ {
			q := pending{id: string(r.View()), offset: r.Varint()}
			if err := m.readInput(r, &q, version); err != nil {
				return nil, err
			}
			ks.waiting().await(q, math.MaxInt, nil) // as checkpointed: within the bounds then; a replay tracks sourced inputs
		}
	}
	n := r.Uvarint()
	for i := uint64(0); i < n && r.Err == nil; i++ {
		id := string(r.View())
		label := int(r.Varint())
		if label != 1 && label != -1 {
			r.Fail("early label")
		}
		e := early{id: id, label: label, offset: r.Varint()}
		lw := ks.waiting()
		lw.early = append(lw.early, e)
		lw.held += e.size()
	}
	if err := m.decodeSections(r, ks, version); err != nil {
		return nil, err
	}
	if hasPeers(version) {
		ks.peers = decodePeers(r)
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	ks.Applied = rec.AppliedThrough
	return ks, nil
}

// decodeSections reads what follows a key state's early labels: the
// pending events' decided predictions, the drift watch, the counters, the
// input statistics and the mixture; a version-1 state (legacy) may end
// before any of them.
func (m *Model) decodeSections(r *wire.Reader, ks *State, version int) error {
	legacy := version == 1
	pend := ks.pending()
	if !legacy || len(r.B) > 0 && r.Err == nil {
		if version < compactAwaited { // the pending queries' decided predictions, apart (since version 10 with each event)
			for i := range pend {
				d, _, flags := int(r.Varint()), r.Float64(), r.Byte() // the margin: never read
				if r.Err != nil || d != 1 && d != -1 || flags > 63 || version < 4 && flags > 31 || legacy && flags > 1 ||
					pend[i].missing && flags&awaitSourced == 0 || flags&awaitSourced != 0 && !pend[i].hasX { // an input left out is a sourced one
					r.Fail("pending prediction")
					break
				}
				pend[i].decided = d
				pend[i].setFlags(flags)
				if ts := r.Varint(); ts != 0 {
					pend[i].ts = time.Unix(0, ts).UTC()
				}
			}
		}
		if !legacy || len(r.B) > 0 && r.Err == nil {
			decodeWatch(r, ks.watch, version)
		}
		if !legacy || len(r.B) > 0 && r.Err == nil {
			decodeStats(r, &ks.stats, len(m.s.Detectors))
		}
		if !legacy || len(r.B) > 0 && r.Err == nil {
			// Input statistics: kept when the key is standardized now; a key
			// standardized before and not now drops them, one not before
			// starts them afresh.
			if std := r.Bytes(); len(std) > 0 && ks.std != nil && r.Err == nil {
				if err := ks.std.UnmarshalBinary(std); err != nil {
					return fmt.Errorf("input statistics: %v: %w", err, errState)
				}
			}
		}
		if !legacy && r.Err == nil { // the mixture (since version 2)
			if mx, ok := decodeMixture(r, version); ok { // none: nil, as blank left it
				ks.setMix(mx)
			}
		}
	} else {
		for i := range pend { // version 1, written when only queries were pending
			pend[i].queried = true
		}
	}
	return nil
}

// encodeWatch appends the watch to a key state (version 3's layout).
func encodeWatch(b []byte, wt *watch) ([]byte, error) {
	if wt == nil {
		wt = &watch{} // no detectors: written as an empty watch
	}
	b = binary.AppendUvarint(b, uint64(len(wt.detectors)))
	for _, d := range wt.detectors {
		var err error
		if b, err = wire.AppendSized(b, d.AppendBinary); err != nil {
			return nil, err
		}
	}
	for i := range wt.detectors {
		b = binary.AppendVarint(b, wt.since[i])
		b = append(b, boolByte(wt.alerted[i]))
	}
	var mask byte
	for si, w := range wt.win {
		if w != nil {
			mask |= 1 << si
		}
	}
	b = append(b, mask)
	for _, w := range wt.win {
		if w == nil {
			continue
		}
		// Only the completed blocks, and the one being filled when it
		// holds a value: a key that has not filled the windows (under 640
		// values) has zeros after its blocks, and next is full.
		if int(w.full) == len(w.sums) || w.next != w.full {
			b = append(b, w.full|0x80, w.curN, w.next) // bit 7: next follows
		} else {
			b = append(b, w.full, w.curN)
		}
		for _, v := range w.sums[:w.full] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		if w.curN > 0 {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(w.cur))
		}
	}
	b = binary.AppendUvarint(b, uint64(len(wt.incidents)))
	for _, in := range wt.incidents {
		b = append(b, in.phase|boolByte(in.hasFloor)<<7)
		if in.hasFloor {
			b = binary.AppendVarint(b, in.quiet)
			for s := range numSignals {
				b = wire.AppendFloat64(b, in.floor[s])
			}
		}
		if in.phase == incidentNone {
			continue
		}
		b = binary.AppendUvarint(b, uint64(in.detector))
		for _, v := range []int64{in.detections, in.quiet, in.opened} {
			b = binary.AppendVarint(b, v)
		}
		for s := range numSignals {
			b = wire.AppendFloat64(b, in.ref[s])
			b = wire.AppendFloat64(b, in.level[s])
			b = binary.AppendVarint(b, in.refN[s])
			b = binary.AppendVarint(b, in.seen[s])
		}
		b = append(b, in.rising)
		for s := range numSignals {
			b = append(b, byte(in.by[s]))
		}
	}
	return b, nil
}

// decodeWatch restores a watch written by encodeWatch, in the layout of
// version, into wt, whose detectors the configuration built. Detectors,
// windows and incidents that the configuration no longer has are read
// past; a version-2 watch keeps its detectors and their alert counts, and
// starts its windows empty and its incidents closed.
func decodeWatch(r *wire.Reader, wt *watch, version int) {
	if wt == nil {
		wt = &watch{} // no detectors configured: read past what was written
	}
	n := r.Uvarint()
	if n > MaxDetectors {
		r.Fail("drift detectors")
		return
	}
	same := n == uint64(len(wt.detectors))
	for i := uint64(0); i < n && r.Err == nil; i++ {
		snap := r.View() // detectors decode by copy
		if r.Err != nil || !same {
			continue // the detectors were reconfigured: the new ones start afresh
		}
		// A snapshot of another detector (reconfigured) is refused and leaves
		// the configured one fresh.
		_ = wt.detectors[i].UnmarshalBinary(snap)
	}
	maxFlags := byte(1)
	if version < 3 {
		maxFlags = 3 // bit 1: a drift awaiting its alert when the cooldown ended
	}
	for i := uint64(0); i < n && r.Err == nil; i++ {
		since, flags := r.Varint(), r.Byte()
		if r.Err != nil || flags > maxFlags {
			r.Fail("drift watch")
			return
		}
		if same {
			wt.since[i], wt.alerted[i] = since, flags&1 == 1
		}
	}
	if version < 3 { // labeled, mistakes and the last outcomes since the last alert: superseded by the windows
		r.Varint()
		r.Varint()
		if k := r.Varint(); k < 0 || k > 64 {
			r.Fail("drift watch")
		}
		r.Uint64()
		return
	}
	decodeWindows(r, wt, version)
	k := r.Uvarint()
	if k > MaxDetectors {
		r.Fail("drift incidents")
		return
	}
	for i := uint64(0); i < k && r.Err == nil; i++ {
		var in incident
		flags := r.Byte()
		in.phase, in.hasFloor = flags&0x7f, flags&0x80 != 0
		if in.hasFloor {
			in.quiet = r.Varint()
			for s := range numSignals {
				in.floor[s] = r.Float64()
			}
		}
		switch {
		case r.Err != nil || in.phase > incidentOpen:
			r.Fail("drift incident")
			return
		case in.phase != incidentNone:
			d := r.Uvarint()
			in.detections, in.quiet, in.opened = r.Varint(), r.Varint(), r.Varint()
			for s := range numSignals {
				in.ref[s], in.level[s], in.refN[s], in.seen[s] = r.Float64(), r.Float64(), r.Varint(), r.Varint()
			}
			in.rising = r.Byte()
			for s := range numSignals {
				in.by[s] = int8(r.Byte())
				if r.Err == nil && (in.by[s] < 0 || uint64(in.by[s]) >= n) {
					r.Fail("drift incident")
					return
				}
			}
			if r.Err == nil && d >= n {
				r.Fail("drift incident")
				return
			}
			in.detector = int(d)
		}
		if same && k == uint64(len(wt.incidents)) {
			wt.incidents[i] = in
		}
	}
}

// decodeWindows reads the signals' windows of a version-3 watch into wt's
// (those it keeps).
func decodeWindows(r *wire.Reader, wt *watch, version int) {
	mask := r.Byte()
	if r.Err != nil || mask >= 1<<numSignals {
		r.Fail("signal windows")
		return
	}
	for si := range numSignals {
		if mask&(1<<si) == 0 {
			continue
		}
		var w windows
		if version < 5 { // every block, then the one being filled, next, full, its count
			for j := range w.sums {
				w.sums[j] = math.Float32frombits(r.Uint32())
			}
			w.cur = math.Float32frombits(r.Uint32())
			w.next, w.full, w.curN = r.Byte(), r.Byte(), r.Byte()
		} else {
			full, curN := r.Byte(), r.Byte()
			w.full, w.curN, w.next = full&^0x80, curN, full&^0x80
			if full&0x80 != 0 {
				w.next = r.Byte()
			}
			for j := range min(int(w.full), len(w.sums)) {
				w.sums[j] = math.Float32frombits(r.Uint32())
			}
			if w.curN > 0 {
				w.cur = math.Float32frombits(r.Uint32())
			}
		}
		if r.Err != nil || int(w.next) >= len(w.sums) || int(w.full) > len(w.sums) || w.curN >= blockLen {
			r.Fail("signal windows")
			return
		}
		if wt.win[si] != nil {
			*wt.win[si] = w
		}
	}
}

// encodeStats appends a key's counters to its state.
func encodeStats(b []byte, s *keyStats) []byte {
	rare := s.rare()
	for _, v := range []int64{s.events, s.labeled, s.mistakes, rare.resets} {
		b = binary.AppendVarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(rare.alertDetector))
	if rare.alertDetector > 0 {
		b = binary.AppendVarint(b, rare.alertOffset)
		b = binary.AppendVarint(b, rare.alertTimestamp)
	}
	return b
}

// decodeStats reads what encodeStats wrote. An alert of a detector the
// configuration no longer has is forgotten.
func decodeStats(r *wire.Reader, s *keyStats, detectors int) {
	var rare keyEvents
	s.events, s.labeled, s.mistakes, rare.resets = r.Varint(), r.Varint(), r.Varint(), r.Varint()
	d := r.Uvarint()
	if d > MaxDetectors {
		r.Fail("key counters")
		return
	}
	if d > 0 {
		rare.alertOffset, rare.alertTimestamp = r.Varint(), r.Varint()
		if int(d) <= detectors {
			rare.alertDetector = int(d)
		}
	}
	if s.events < 0 || s.labeled < 0 || s.mistakes < 0 || s.mistakes > s.labeled || rare.resets < 0 {
		r.Fail("key counters")
	}
	s.more = nil
	if rare != (keyEvents{}) {
		s.more = new(keyEvents) // not &rare: that would allocate for every key
		*s.more = rare
	}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// StateFingerprint identifies what the model's key records decode under:
// the learner's snapshot of a blank key (catalog name, dimension, encoded
// parameters and the release's snapshot format), the drift detectors and
// standardization. A record written under one fingerprint is read back
// only under the same.
func (m *Model) StateFingerprint() ([32]byte, error) {
	cfg := &m.s
	l, err := m.maker.New(learners.Config{Dim: cfg.Vector.Dim})
	if err != nil {
		return [32]byte{}, err
	}
	snap, err := l.MarshalBinary()
	if err != nil {
		return [32]byte{}, err
	}
	det, err := json.Marshal(cfg.Detectors)
	if err != nil {
		return [32]byte{}, err
	}
	h := sha256.New()
	for _, b := range [][]byte{snap, det, {boolByte(cfg.Standardize)}} {
		h.Write(binary.AppendUvarint(nil, uint64(len(b))))
		h.Write(b)
	}
	return [32]byte(h.Sum(nil)), nil
}

// snapshotIdentity is the snapshot identity (learners.SplitSnapshot) of
// the learners maker builds at dimension dim.
func snapshotIdentity(maker *learners.Maker, dim int) ([]byte, error) {
	l, err := maker.New(learners.Config{Dim: dim})
	if err != nil {
		return nil, err
	}
	snap, err := l.MarshalBinary()
	if err != nil {
		return nil, err
	}
	_, identity, _, err := learners.SplitSnapshot(snap)
	return bytes.Clone(identity), err
}

// identityHash names a learner's snapshot identity in a key state: FNV-1a,
// 64 bits.
func identityHash(identity []byte) uint64 {
	h := fnv.New64a()
	h.Write(identity)
	return h.Sum64()
}
