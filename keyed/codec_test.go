package keyed

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/internal/wire"
	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/topics"
)

// Key states written by older builds (testdata/keystate-v1.golden, made by
// the codec before it had a header, and keystate-v2.golden, by the codec
// before the drift watch kept windows and incidents, both under
// goldenConfig) still decode, and are written back in the current version
// with every section but the watch's windows and incidents unchanged: a
// changelog written by an older build restores into this one.
func TestOlderKeyStatesDecode(t *testing.T) {
	m := testModel(t, goldenConfig(t))
	for _, tc := range []struct {
		file    string
		version byte
		keys    int // from keystate-v4.golden on: each key's changelog encoding too, and unscaled keys
	}{{"testdata/keystate-v1.golden", 1, 5}, {"testdata/keystate-v2.golden", 2, 5}, {"testdata/keystate-v3.golden", 3, 5}, {"testdata/keystate-v4.golden", 4, 20}, {"testdata/keystate-v5.golden", 5, 20}, {"testdata/keystate-v6.golden", 6, 20}, {"testdata/keystate-v8.golden", 8, 20}} {
		keys, pending, withStats, alerted := 0, 0, 0, 0
		for key, old := range goldenFile(t, tc.file) {
			if (old[0] == 0) != (tc.version > 1) || tc.version > 1 && old[1] != tc.version {
				t.Fatalf("%s: key %s starts %x: not version %d", tc.file, key, old[:2], tc.version)
			}
			ks, err := m.Decode(&checkpoint.KeyRecord{Key: key, State: old})
			if err != nil {
				t.Fatalf("%s: key %s: %v", tc.file, key, err)
			}
			now, err := ks.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if now[0] != 0 || now[1] != peerlessVersion { // no golden state has peers
				t.Fatalf("%s: key %s written back as version %x", tc.file, key, now[:2])
			}
			back, err := m.Decode(&checkpoint.KeyRecord{Key: key, State: now})
			if err != nil {
				t.Fatalf("%s: key %s written back does not decode: %v", tc.file, key, err)
			}
			sameSections(t, key, ks, back)
			keys++
			pending += len(ks.pending())
			if ks.stats.events > 0 {
				withStats++
			}
			if slices.Contains(ks.watch.alerted, true) {
				alerted++
			}
		}
		// The golden keys carry the sections the test is about.
		if keys != tc.keys || pending == 0 || withStats != keys || tc.version == 2 && alerted == 0 {
			t.Fatalf("%s: %d keys, %d pending events, %d with counters, %d alerted: the golden file does not cover the sections", tc.file, keys, pending, withStats, alerted)
		}
	}
}

// The current version's encodings of the scripted keys of goldenStates
// (the key store's and the changelog's) are testdata/keystate-v10.golden,
// byte for byte: a change of the format is a
// new version, made on purpose (DRIFTSTREAM_UPDATE_GOLDEN=1 rewrites the
// file). The learner's and the detectors' snapshots inside carry versions
// of their own (packages learners and drift), which read their older ones:
// the file was rewritten when drift's version 2 made ADWIN's compact.
func TestKeyStateGolden(t *testing.T) {
	m := testModel(t, goldenConfig(t))
	// Unstandardized, the awaited events' inputs are sourced: the changelog
	// encoding leaves them out.
	unscaled := goldenConfig(t)
	unscaled.Standardize = false
	var b strings.Builder
	for _, set := range []struct {
		prefix string
		m      *Model
	}{{"", m}, {"unscaled-", testModel(t, unscaled)}} {
		for _, kv := range goldenStates(t, set.m) {
			b.WriteString(set.prefix + kv[0] + " " + kv[1] + "\n")
		}
	}
	const file = "testdata/keystate-v10.golden"
	if os.Getenv("DRIFTSTREAM_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatalf("the scripted keys encode otherwise than %s: a format change needs a new version", file)
	}
	if m.stats.Alerts == 0 || m.stats.IncidentsResolved == 0 && m.stats.DetectionsAbsorbed == 0 {
		t.Fatalf("the scripted keys open no incident (%+v): the golden file does not cover the watch", *m.stats)
	}
}

// goldenFile reads a golden file's lines, "key hex-state".
func goldenFile(t testing.TB, name string) map[string][]byte {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		key, hx, _ := strings.Cut(sc.Text(), " ")
		b, err := hex.DecodeString(hx)
		if err != nil || len(b) < 2 {
			t.Fatalf("%s: key %s: %v", name, key, err)
		}
		out[key] = b
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameSections fails unless a and b hold the same learner, label wait,
// counters, detectors, input statistics and mixture.
func sameSections(t *testing.T, key string, a, b *State) {
	t.Helper()
	snap := func(s interface{ MarshalBinary() ([]byte, error) }) string {
		v, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	if snap(a.learner) != snap(b.learner) {
		t.Errorf("key %s: learner differs", key)
	}
	snap(a) // both keep their awaited inputs encoded, as a checkpoint leaves them (pending.appendInput)
	snap(b)
	if !sameWait(a.wait, b.wait) || !reflect.DeepEqual(a.stats, b.stats) || !reflect.DeepEqual(a.mix, b.mix) {
		t.Errorf("key %s: label wait, counters or mixture differ", key)
	}
	if (a.std == nil) != (b.std == nil) || a.std != nil && snap(a.std) != snap(b.std) {
		t.Errorf("key %s: input statistics differ", key)
	}
	for i := range a.watch.detectors {
		if snap(a.watch.detectors[i]) != snap(b.watch.detectors[i]) {
			t.Errorf("key %s: detector %d differs", key, i)
		}
	}
	if !slices.Equal(a.watch.since, b.watch.since) || !slices.Equal(a.watch.alerted, b.watch.alerted) || !reflect.DeepEqual(a.watch.win, b.watch.win) ||
		!slices.Equal(a.watch.incidents, b.watch.incidents) {
		t.Errorf("key %s: watch differs", key)
	}
}

// sameWait reports whether two label waits hold the same events and early
// labels, whatever either cached of its encoding.
func sameWait(a, b *labelWait) bool {
	if a == nil || b == nil {
		return a == b
	}
	ac, bc := *a, *b
	ac.cache, bc.cache = awaitedCache{}, awaitedCache{}
	return reflect.DeepEqual(ac, bc)
}

// A key's encoding is sized by what its pending events hold, not by their
// dimension: a sparse input in a wide hashed space must not make a
// buffer of megabytes (it did when the size was 9 bytes per dimension).
func TestKeyStateBufferFitsSparsePendingEvents(t *testing.T) {
	m := testModel(t, testSettings(t, "lasec-ss", `{"a":5}`))
	ks, err := m.NewState("k")
	if err != nil {
		t.Fatal(err)
	}
	x, err := learners.NewSparse(1<<22, []int32{3, 70000, 4000000}, []float64{1, -2, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		q := pending{id: fmt.Sprint("e", i), offset: int64(i), decided: 1, queried: true}
		q.keep(x) // as Model.await keeps it
		ks.waiting().await(q, 10, nil)
	}
	b, err := ks.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if cap(b) > 1<<12 {
		t.Fatalf("a key with 3 sparse pending events of 3 values each was encoded into a buffer of %d bytes (%d used)", cap(b), len(b))
	}
}

// A key state written before pending queries kept their prediction still
// restores: its queries are learned when answered, but not scored.
func TestKeyStateWithoutDecidedPredictions(t *testing.T) {
	m := testModel(t, testSettings(t, "lasec-ss", `{"a":5}`))
	ks, err := m.NewState("k")
	if err != nil {
		t.Fatal(err)
	}
	x, _ := m.s.Vector.Vector(topics.Event{X: []float64{1, 2, 3, 4}})
	ks.waiting().pending = []pending{{id: "a", offset: 3, x: x, decided: 1, queried: true}, {id: "b", offset: 4, decided: -1}}
	current, err := ks.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b := asVersion8(t, current, ks.pending())
	// The key has no detectors: version 3 writes its watch as three zero
	// bytes (no detectors, no windows, no incidents), version 2 as twelve
	// (no detectors, three zero counts, eight bytes of outcomes).
	statsLen := len(encodeStats(nil, &ks.stats)) + 1 // and an empty input-statistics section
	tail := len(b) - 1 - statsLen                    // where the counters start
	if w := b[tail-3 : tail]; !bytes.Equal(w, []byte{0, 0, 0}) {
		t.Fatalf("empty watch written as %x", w)
	}
	// Before version 6 the learner's snapshot was written whole.
	snap, err := ks.learner.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	_, _, body, _ := learners.SplitSnapshot(snap)
	learnerLen := 1 + 8 + len(binary.AppendUvarint(nil, uint64(len(body)))) + len(body)
	whole := slices.Concat(b[:2], wire.AppendBytes(nil, snap), b[2+learnerLen:])
	tail += len(whole) - len(b)
	v2 := slices.Concat([]byte{0, 2}, whole[2:tail-3], make([]byte, 12), whole[tail:])
	v1 := v2[2 : len(v2)-1] // version 1 had no header and no mixture
	watchLen := 12
	for _, tc := range []struct {
		name  string
		state []byte
		want  []int
	}{
		{"current", current, []int{1, -1}},
		{"version 8", b, []int{1, -1}},
		{"version 2", v2, []int{1, -1}},
		{"version 1", v1, []int{1, -1}},
		{"version 1 before key counters", v1[:len(v1)-statsLen], []int{1, -1}},
		{"version 1, older", v1[:len(v1)-statsLen-watchLen-2*11], []int{0, 0}},
	} {
		got, err := m.Decode(&checkpoint.KeyRecord{Key: "k", State: tc.state})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if pend := got.pending(); len(pend) != 2 || pend[0].decided != tc.want[0] || pend[1].decided != tc.want[1] {
			t.Fatalf("%s: pending %+v", tc.name, pend)
		}
	}
	for _, cut := range []struct {
		name  string
		state []byte
	}{
		{"a cut extension", v1[:len(v1)-4]},
		{"version 2 without its mixture", v2[:len(v2)-1]},
		{"version 8 without its mixture", b[:len(b)-1]},
		{"version 8 without its key counters", b[:len(b)-1-statsLen]},
		{"version 8 cut anywhere", b[:len(b)-3]},
		{"version 8 with a byte more", append(slices.Clone(b), 0)},
		{"version 7", append([]byte{0, 7}, b[2:]...)},
		{"the current version without its mixture", current[:len(current)-1]},
		{"the current version cut anywhere", current[:len(current)-3]},
		{"the current version with a byte more", append(slices.Clone(current), 0)},
		{"the current version read as version 8", append([]byte{0, 8}, current[2:]...)},
	} {
		if _, err := m.Decode(&checkpoint.KeyRecord{Key: "k", State: cut.state}); err == nil {
			t.Errorf("%s decoded", cut.name)
		}
	}
}

// An awaited event's input is encoded once, at its key's first checkpoint
// after the event: the key's later checkpoints copy those bytes and write
// what encoding it again writes, and its label, when it comes, teaches
// exactly what it teaches a key that was never checkpointed meanwhile.
func TestAwaitedInputEncodedOnce(t *testing.T) {
	m := testModel(t, testSettings(t, "logreg", `{}`))
	cached, fresh := newTestState(t, m, "k"), newTestState(t, m, "k")
	step := func(ks *State, i int, ev topics.Event) {
		t.Helper()
		m.Step(Input{Key: "k", Offset: int64(i), Event: &ev}, ks)
		ks.Applied[EventsTopic] = int64(i)
	}
	for i := range 6 {
		ev := topics.Event{Kind: topics.Input, ID: fmt.Sprint("u", i), X: []float64{float64(i), 1, -0.5, 0.25 * float64(i)}}
		step(cached, i, ev)
		step(fresh, i, ev)
	}
	first, _ := cached.MarshalBinary()
	for _, p := range cached.pending() {
		if p.xb == nil || p.x.Dim() != 0 || !p.hasX || p.nnz != dim {
			t.Fatalf("after a checkpoint, awaited event %s holds x of dimension %d and %d encoded bytes (input kept %v, %d values)", p.id, p.x.Dim(), len(p.xb), p.hasX, p.nnz)
		}
	}
	second, _ := cached.MarshalBinary()
	unencoded, _ := fresh.MarshalBinary()
	if !bytes.Equal(first, second) || !bytes.Equal(first, unencoded) {
		t.Fatal("a key state written from encoded inputs differs from one written from the inputs")
	}
	fresh = newTestState(t, m, "k") // and again, never checkpointed: the labels join inputs in memory
	for i := range 6 {
		step(fresh, i, topics.Event{Kind: topics.Input, ID: fmt.Sprint("u", i), X: []float64{float64(i), 1, -0.5, 0.25 * float64(i)}})
	}
	for i := range 6 {
		ev := topics.Event{Kind: topics.LabelRecord, ID: fmt.Sprint("u", i), Label: 1 - 2*(i%2)}
		step(cached, 6+i, ev)
		step(fresh, 6+i, ev)
	}
	a, _ := cached.MarshalBinary()
	b, _ := fresh.MarshalBinary()
	if cached.Awaiting() != 0 || m.stats.LabelsJoined != 12 || !bytes.Equal(a, b) {
		t.Fatalf("after the labels: %d still awaited, %d joined (want 12); states equal: %v", cached.Awaiting(), m.stats.LabelsJoined, bytes.Equal(a, b))
	}
}

// newTestState is a new state of key under m.
func newTestState(t *testing.T, m *Model, key string) *State {
	t.Helper()
	ks, err := m.NewState(key)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// A signal's windows are written as far as they are filled: the blocks
// completed, and the one being filled when it holds a value; they decode
// to what was encoded, at every fill.
func TestWindowsEncodeWhatTheyHold(t *testing.T) {
	for _, tc := range []struct {
		values, bytes int
	}{
		{0, 2},                        // full 0, count 0
		{10, 2 + 4},                   // the block being filled
		{32, 2 + 4},                   // one block completed
		{100, 2 + 3*4 + 4},            // three, and a part
		{640, 3 + 20*4},               // every block: next follows
		{700, 3 + 20*4 + 4},           // the ring turned
		{blockLen * 25, 3 + 20*4 + 0}, // turned, the block empty
		{blockLen*25 + 1, 3 + 20*4 + 4},
	} {
		wt := &watch{}
		wt.win[sigMistakes] = new(windows)
		for i := range tc.values {
			wt.win[sigMistakes].add(float64(i % 3 % 2))
		}
		b, err := encodeWatch(nil, wt)
		if err != nil {
			t.Fatal(err)
		}
		// An empty watch's header (no detectors, no incidents) and the
		// mask are 3 bytes.
		if got := len(b) - 3; got != tc.bytes {
			t.Errorf("%d values: windows of %d bytes, want %d", tc.values, got, tc.bytes)
		}
		back := &watch{}
		back.win[sigMistakes] = new(windows)
		r := wire.NewReader(b, errState)
		decodeWatch(r, back, stateVersion)
		if r.Err != nil || *back.win[sigMistakes] != *wt.win[sigMistakes] {
			t.Errorf("%d values: decoded %+v, %v; want %+v", tc.values, *back.win[sigMistakes], r.Err, *wt.win[sigMistakes])
		}
	}
}

// A model appends a key's changelog record to a buffer (a checkpoint's
// records share one) as MarshalChangelog writes it, and its key-store
// record as MarshalBinary does, the bytes before them untouched: for a learner that appends its own snapshot (logreg) and one
// that does not (lasec-ss), with pending events, detectors and a shared
// part.
func TestAppendChangelogIsMarshalChangelog(t *testing.T) {
	for _, s := range []Settings{goldenConfig(t), testSettings(t, "logreg", ""), testSettings(t, "perceptron", "")} {
		t.Run(s.Learner, func(t *testing.T) {
			s.Detectors = []DetectorSpec{{Detector: "adwin", Signal: SignalMistakes}}
			m := testModel(t, s)
			r := rand.New(rand.NewPCG(3, 4))
			prefix := []byte("earlier records")
			buf := append([]byte(nil), prefix...)
			for k := range 3 {
				key := fmt.Sprint("k", k)
				ks := newTestState(t, m, key)
				for i := range 200 {
					x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
					ev := topics.Event{ID: fmt.Sprint("e", i), X: x, Label: 1 - 2*(i%2)}
					if i >= 190 { // awaiting their labels
						ev.Label = 0
					}
					if st := m.Step(Input{Key: key, Topic: EventsTopic, Offset: int64(i), Event: &ev}, ks); st.Refused != nil {
						t.Fatal(st.Refused)
					}
				}
				want, err := ks.MarshalChangelog()
				if err != nil {
					t.Fatal(err)
				}
				at := len(buf)
				if buf, err = m.AppendChangelog(buf, ks); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf[at:], want) || !bytes.HasPrefix(buf, prefix) {
					t.Fatalf("key %d: appended %x, MarshalChangelog %x", k, buf[at:], want)
				}
				whole, err := ks.MarshalBinary() // the key store's record, the awaited inputs in it
				if err != nil {
					t.Fatal(err)
				}
				at = len(buf)
				if buf, err = m.AppendState(buf, ks); err != nil || !bytes.Equal(buf[at:], whole) {
					t.Fatalf("key %d: appended state %x (%v), MarshalBinary %x", k, buf[at:], err, whole)
				}
			}
		})
	}
}

// nameIdentity replaces a snapshot's identity by its hash and the body's
// length, in place or, for an identity shorter than those, by moving the
// body up; given an identity, a snapshot of another is hashed as it is.
func TestNameIdentity(t *testing.T) {
	l, err := learners.New("logreg", nil, learners.Config{Dim: 3})
	if err != nil {
		t.Fatal(err)
	}
	real, _ := l.MarshalBinary()
	_, realID, realBody, _ := learners.SplitSnapshot(real)
	// A hand-made snapshot of a learner named "x", dimension 1, parameters
	// {}: an identity of 6 bytes, shorter than a hash and a length.
	short := []byte{2, 2, 'x', 2, 4, '{', '}', 0xAA, 0xBB, 0xCC}
	shortID, shortBody := short[1:7], short[7:]
	want := func(version byte, id, body []byte) []byte {
		b := binary.LittleEndian.AppendUint64([]byte{version}, identityHash(id))
		return append(binary.AppendUvarint(b, uint64(len(body))), body...)
	}
	for _, c := range []struct {
		name     string
		snap     []byte
		identity []byte
		hash     uint64
		want     []byte
	}{
		{"the model's identity", real, realID, identityHash(realID), want(real[0], realID, realBody)},
		{"none given", real, nil, 0, want(real[0], realID, realBody)},
		{"another given", real, []byte("another identity"), 42, want(real[0], realID, realBody)},
		{"a short identity", short, nil, 0, want(2, shortID, shortBody)},
		{"a short identity given", short, shortID, identityHash(shortID), want(2, shortID, shortBody)},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := append([]byte("before"), c.snap...)
			got, err := nameIdentity(b, len("before"), c.identity, c.hash)
			if err != nil {
				t.Fatal(err)
			}
			if string(got[:6]) != "before" || !bytes.Equal(got[6:], c.want) {
				t.Fatalf("got %x, want before + %x", got, c.want)
			}
		})
	}
	if _, err := nameIdentity([]byte{2, 9}, 0, nil, 0); err == nil {
		t.Fatal("a cut snapshot was accepted")
	}
}

// The mixture's section: none, weights as two floats, and since version 8
// the additive model's choice (weights exactly 1 and 0, or 0 and 1) in its
// flag alone; each decodes to what was encoded, and a flag a version did
// not have is refused.
func TestMixtureSection(t *testing.T) {
	for _, c := range []struct {
		name string
		mix  *mixture
		want []byte // the section
	}{
		{"none", nil, []byte{mixtureNone}},
		{"the shared part", &mixture{population: 1, own: 0}, []byte{mixtureShared}},
		{"alone", &mixture{population: 0, own: 1}, []byte{mixtureOwn}},
		{"weights", &mixture{population: 0.25, own: 0.75}, wire.AppendFloat64(wire.AppendFloat64([]byte{mixtureWeights}, 0.25), 0.75)},
		{"a negative zero is a weight", &mixture{population: 1, own: math.Copysign(0, -1)}, wire.AppendFloat64(wire.AppendFloat64([]byte{mixtureWeights}, 1), math.Copysign(0, -1))},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := appendMixture([]byte("x"), c.mix)
			if !bytes.Equal(b[1:], c.want) {
				t.Fatalf("section %x, want %x", b[1:], c.want)
			}
			r := wire.NewReader(b[1:], errState)
			back, ok := decodeMixture(r, peerlessVersion)
			if err := r.Done(); err != nil {
				t.Fatal(err)
			}
			if ok != (c.mix != nil) || ok && (math.Float64bits(back.population) != math.Float64bits(c.mix.population) || math.Float64bits(back.own) != math.Float64bits(c.mix.own)) {
				t.Fatalf("decoded %+v, want %+v", back, c.mix)
			}
		})
	}
	for _, c := range []struct {
		version int
		section []byte
	}{{6, []byte{mixtureShared}}, {7, []byte{mixtureOwn}}, {8, []byte{mixtureOwn + 1}}, {8, []byte{mixtureWeights, 1, 2}}} {
		r := wire.NewReader(c.section, errState)
		if decodeMixture(r, c.version); r.Err == nil {
			t.Errorf("version %d: section %x read", c.version, c.section)
		}
	}
	// Version 6's additive key, weights as floats, reads as version 8's.
	r := wire.NewReader(wire.AppendFloat64(wire.AppendFloat64([]byte{mixtureWeights}, 1), 0), errState)
	if m, ok := decodeMixture(r, 6); r.Err != nil || !ok || m != (mixture{population: 1, own: 0}) {
		t.Fatalf("version 6's floats: %+v, %v", m, r.Err)
	}
}

// An additive model's key writes its choice in the mixture's flag: its
// record ends with one byte for it, 16 fewer than in version 6.
func TestAdditiveKeyWritesItsChoiceInAByte(t *testing.T) {
	s := testSettings(t, "logreg", "")
	s.Population = PopulationAdditive
	m, _ := heldModel(t, s, &Totals{})
	ks := newTestState(t, m, "k")
	for i := range 30 {
		ev := topics.Event{ID: fmt.Sprint("e", i), X: []float64{1, float64(i % 3), -1, 0.5}, Label: 1 - 2*(i%2)}
		if st := m.Step(Input{Key: "k", Topic: EventsTopic, Offset: int64(i), Event: &ev}, ks); st.Refused != nil || st.Failed != nil {
			t.Fatal(st.Refused, st.Failed)
		}
	}
	b, err := ks.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if ks.mix == nil || last(b) != mixtureShared && last(b) != mixtureOwn {
		t.Fatalf("the record ends with %x (mixture %+v)", last(b), ks.mix)
	}
	back, err := m.Decode(&checkpoint.KeyRecord{Key: "k", State: b})
	if err != nil || *back.mix != *ks.mix {
		t.Fatalf("decoded mixture %+v, %v; want %+v", back.mix, err, ks.mix)
	}
}

func last(b []byte) byte { return b[len(b)-1] }

// asVersion8 rewrites a peerless key state of the current version, whose
// awaited events are pend, in version 8's layout (codec.go): each event's
// id, offset and input, the early labels, then each event's decided label,
// margin (written as 0: nothing read it), flags and time
// (version8Awaited).
func asVersion8(t *testing.T, state []byte, pend []pending) []byte {
	t.Helper()
	if state[1] != peerlessVersion {
		t.Fatalf("not a peerless state of the current version: %x", state[:2])
	}
	at := awaitedAt(t, state)
	head := state[:at]
	rest := state[at+len(appendAwaited(nil, pend, false)):] // the early labels on
	r := wire.NewReader(rest, errState)
	for n := r.Uvarint(); n > 0; n-- {
		r.View()
		r.Varint()
		r.Varint()
	}
	early, after := rest[:len(rest)-len(r.B)], r.B
	b := version8Awaited(append([]byte{0, 8}, head[2:]...), pend, early, false)
	return append(b, after...)
}

// awaitedAt is where the awaited events' section starts in a key state of
// version 6 on: after the header, the learner's snapshot and the margin
// rule's RNG.
func awaitedAt(t *testing.T, state []byte) int {
	t.Helper()
	r := wire.NewReader(state[2:], errState)
	r.Byte()
	r.Uint64()
	r.View() // the learner's snapshot
	r.View() // the margin rule's RNG
	if r.Err != nil {
		t.Fatalf("a key state cut before its awaited events: %v", r.Err)
	}
	return len(state) - len(r.B)
}

// version8Awaited appends what versions 6 to 9 wrote from the awaited
// events to the drift watch: the events' ids, offsets and inputs (omit:
// sourced ones left out), the early labels' section (early, as written),
// then the events' decided labels, margins (0: nothing read them), flags
// and times. The layout is frozen here, not the encoder's; the fields'
// own encodings (an input's, the flags' bits 0–5) are those version 10
// kept.
func version8Awaited(b []byte, pend []pending, early []byte, omit bool) []byte {
	b = binary.AppendUvarint(b, uint64(len(pend)))
	for i := range pend {
		b = wire.AppendString(b, pend[i].id)
		b = binary.AppendVarint(b, pend[i].offset)
		b = pend[i].appendHeld(b, omit)
	}
	b = append(b, early...)
	for i := range pend {
		b = binary.AppendVarint(b, int64(pend[i].decided))
		b = wire.AppendFloat64(b, 0)
		b = append(b, pend[i].flags())
		var ts int64
		if !pend[i].ts.IsZero() {
			ts = pend[i].ts.UnixNano()
		}
		b = binary.AppendVarint(b, ts)
	}
	return b
}

// Version 10 changed how awaited events are written, not what a key
// holds: each golden key of version 8 decodes to the state its version-10
// golden encoding decodes to (the same scripted stream), awaited events
// and all.
func TestVersion10HoldsWhatVersion8Held(t *testing.T) {
	m := testModel(t, goldenConfig(t))
	unscaled := goldenConfig(t)
	unscaled.Standardize = false
	mu := testModel(t, unscaled)
	v8, v10 := goldenFile(t, "testdata/keystate-v8.golden"), goldenFile(t, "testdata/keystate-v10.golden")
	if len(v8) != len(v10) || len(v8) == 0 {
		t.Fatalf("%d keys of version 8, %d of version 10", len(v8), len(v10))
	}
	pending := 0
	for key, old := range v8 {
		mk := m
		if strings.HasPrefix(key, "unscaled-") {
			mk = mu
		}
		a, err := mk.Decode(&checkpoint.KeyRecord{Key: key, State: old})
		if err != nil {
			t.Fatalf("key %s, version 8: %v", key, err)
		}
		b, err := mk.Decode(&checkpoint.KeyRecord{Key: key, State: v10[key]})
		if err != nil {
			t.Fatalf("key %s, version 10: %v", key, err)
		}
		if v10[key][1] != 10 {
			t.Fatalf("key %s: version %d in the version-10 golden", key, v10[key][1])
		}
		sameSections(t, key, a, b)
		pending += len(b.pending())
	}
	if pending == 0 {
		t.Fatal("the golden keys await no event")
	}
}
