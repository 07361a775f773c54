package keyed

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/topics"
)

// The awaited events' section (version 10) gives back every field of
// every event, whatever the distances between neighbours: times none, the
// Unix epoch, whole milliseconds, nanoseconds, centuries apart either way;
// offsets going back; ids sharing a prefix or not, multi-byte ones split
// inside a rune; decided labels unknown, −1 and +1; the experts' labels;
// inputs held, and sourced ones left out or missing.
func TestAwaitedSectionRoundTrips(t *testing.T) {
	m := testModel(t, testSettings(t, "logreg", `{}`))
	x, _ := m.s.Vector.Vector(topics.Event{X: []float64{1, -2, 0.5, 3}})
	epoch := time.Unix(0, 0).UTC()
	base := time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)
	far := time.Unix(0, math.MaxInt64).UTC()
	before := time.Unix(0, math.MinInt64+1).UTC()
	events := []pending{
		{id: "evt-000100", offset: 100, decided: 1, queried: true, ts: base},
		{id: "evt-000107", offset: 107, decided: -1, ts: base.Add(5 * time.Millisecond)},
		{id: "evt-000107x", offset: 90, ts: base.Add(5*time.Millisecond + 3)}, // an offset going back, a time in nanoseconds
		{id: "", offset: 91, decided: 1, populationOnly: true},
		{id: "évènement", offset: 1 << 40, decided: -1, own: 1, population: -1, ts: epoch},
		{id: "é", offset: 1<<40 + 1, decided: 1, own: -1, population: 1, ts: far},
		{id: "évè", offset: 0, decided: 1, ts: before},
		{id: "z", offset: 5, decided: -1, ts: far},
		{id: "sourced", offset: 6, decided: 1, sourced: true, ts: base.Add(-time.Hour)},
		{id: "sourced-missing", offset: 7, decided: -1, sourced: true, missing: true, hasX: true, nnz: 4},
	}
	for i := range events {
		if !events[i].missing && i != 3 {
			events[i].keep(x)
		}
	}
	for _, omit := range []bool{false, true} {
		ks := newTestState(t, m, "k")
		lw := ks.waiting()
		for _, q := range events {
			lw.await(q, math.MaxInt, nil)
		}
		b, err := ks.appendState(nil, omit, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		back, err := m.Decode(&checkpoint.KeyRecord{Key: "k", State: b})
		if err != nil {
			t.Fatalf("omit %v: %v", omit, err)
		}
		got := back.pending()
		if len(got) != len(events) {
			t.Fatalf("omit %v: %d events back of %d", omit, len(got), len(events))
		}
		for i, want := range events {
			g := got[i]
			wx, _ := lw.pending[i].input()
			gx, _ := g.input()
			if g.id != want.id || g.offset != want.offset || g.decided != want.decided || g.queried != want.queried ||
				g.populationOnly != want.populationOnly || g.own != want.own || g.population != want.population ||
				g.sourced != want.sourced || !g.ts.Equal(want.ts) || g.ts.IsZero() != want.ts.IsZero() ||
				g.hasX != lw.pending[i].hasX || g.nnz != lw.pending[i].nnz ||
				g.missing != (want.missing || omit && want.sourced) || g.hasX && !g.missing && !reflect.DeepEqual(gx, wx) {
				t.Errorf("omit %v: event %d back as %+v, written %+v", omit, i, g, lw.pending[i])
			}
		}
		if again, _ := back.appendState(nil, omit, nil, 0); string(again) != string(b) {
			t.Errorf("omit %v: written back otherwise", omit)
		}
	}
}

// A key with many awaited events writes a few bytes for each: here, with
// ids of a counter, offsets some hundreds apart and times in milliseconds,
// about 12 bytes an event with its input left out, under half of what
// version 8 wrote.
func TestAwaitedEventsAreCompact(t *testing.T) {
	var pend []pending
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for i := range 200 {
		q := pending{id: "e" + strconv.Itoa(123456+250*i), offset: int64(80_000 + 250*i), decided: 1 - 2*(i%2), queried: i%3 == 0,
			sourced: true, missing: true, hasX: true, nnz: 11, ts: base.Add(time.Duration(i*37) * time.Millisecond)}
		pend = append(pend, q)
	}
	// Both with the (empty) early labels' section between them and the
	// watch: version 8 wrote it in the middle of the awaited events'.
	b := append(appendAwaited(nil, pend, true), 0)
	perEvent, v8 := float64(len(b))/float64(len(pend)), float64(len(version8Awaited(nil, pend, []byte{0}, true)))/float64(len(pend))
	if perEvent > 13 || perEvent > v8/2 {
		t.Fatalf("%.1f bytes an awaited event (version 8: %.1f)", perEvent, v8)
	}
	t.Logf("%.1f bytes an awaited event (version 8: %.1f)", perEvent, v8)
}

// A damaged awaited section is refused, never read as other events: an id
// sharing more than the previous one has, a positive decided label that
// is not known, an input left out that is not sourced.
func TestAwaitedSectionRefusesDamage(t *testing.T) {
	m := testModel(t, testSettings(t, "logreg", `{}`))
	ks := newTestState(t, m, "k")
	good, err := ks.appendState(nil, false, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Decode(&checkpoint.KeyRecord{Key: "k", State: good}); err != nil {
		t.Fatal(err)
	}
	at := awaitedAt(t, good) // the awaited section: one zero byte, no events
	for _, tc := range []struct {
		name    string
		section []byte
	}{
		{"an id sharing what no previous id has", []byte{1, 0, 2, 0, 1, 'a', 0, 0, 0}},
		{"+1 without a decided label", []byte{1, awaitDecidedPos, 0, 1, 'a', 0, 0, 0}},
		{"an input left out, not sourced", []byte{1, awaitDecided, 0, 1, 'a', 0, 0, 4, 0}},
		{"cut in an event", []byte{1, awaitDecided, 0, 1, 'a'}},
	} {
		state := append(append(append([]byte{}, good[:at]...), tc.section...), good[at+1:]...)
		if _, err := m.Decode(&checkpoint.KeyRecord{Key: "k", State: state}); err == nil {
			t.Errorf("%s: decoded", tc.name)
		}
	}
}

// A key's cached changelog encoding of its awaited events is, at every
// checkpoint, what encoding them afresh writes: through random runs of new
// events (with and without times, sourced or held inputs), labels joining
// any of them, the oldest expiring, and checkpoints in between.
func TestAwaitedCacheIsTheEncoding(t *testing.T) {
	m := testModel(t, testSettings(t, "logreg", `{}`))
	x, _ := m.s.Vector.Vector(topics.Event{X: []float64{1, -2, 0.5, 3}})
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 7))
		lw := &labelWait{awaited: map[string]awaitedID{}}
		offset, checkpoints, reused := int64(0), 0, 0
		for step := range 2000 {
			switch op := r.IntN(10); {
			case op < 5 || len(lw.pending) == 0: // a new event
				offset += 1 + r.Int64N(300)
				q := pending{id: "e" + strconv.FormatInt(offset, 10), offset: offset, decided: 1 - 2*r.IntN(2), queried: r.IntN(2) == 0, sourced: r.IntN(4) > 0}
				if r.IntN(3) > 0 {
					q.ts = base.Add(time.Duration(offset) * time.Millisecond)
				}
				q.keep(x)
				lw.await(q, math.MaxInt, nil)
			case op < 7: // a label joins any awaited event
				lw.unawait(r.IntN(len(lw.pending)), nil)
			case op < 8: // the oldest expire
				lw.dropAwaited(1+r.IntN(min(3, len(lw.pending))), nil)
			default: // a checkpoint
				if len(lw.cache.ends) > 0 {
					reused++
				}
				got := lw.appendChangelog([]byte{9})
				want := appendAwaited([]byte{9}, lw.pending, true)
				if !bytes.Equal(got, want) {
					t.Fatalf("seed %d step %d: the cached encoding of %d events differs from a fresh one", seed, step, len(lw.pending))
				}
				checkpoints++
			}
		}
		if checkpoints == 0 || reused == 0 {
			t.Fatalf("seed %d: %d checkpoints, %d from a cache", seed, checkpoints, reused)
		}
	}
}
