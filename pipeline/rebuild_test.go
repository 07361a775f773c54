package pipeline

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
)

// A changelog whose latest record of some key cannot be used — unreadable,
// or a zombie's (written after a newer owner's claim) that the cleaner
// left alone by removing the accepted record it superseded — restores that
// key from further back. With the population off that is exact; with the
// shipped population model it is not (the key would replay beside a shared
// part ahead of it), and the partition is rebuilt from its inputs' first
// records instead. A record that is valid but not the one its writer left
// (the shared part's older record in place of its latest) only the marker's
// digest sees: the restore does not match it, and the partition is rebuilt,
// whatever the model. Every case ends bit-identical to one uninterrupted
// run, with no prediction missing or repeated.
func TestInexactRestoreRebuildsFromTheInputs(t *testing.T) {
	damages := []struct {
		name     string
		damage   func(t *testing.T, log []checkpoint.Entry) []checkpoint.Entry
		mismatch bool // only the digest can see it: every record is valid
	}{
		{"the shared part's older record in place of its latest", func(t *testing.T, log []checkpoint.Entry) []checkpoint.Entry {
			i := slices.IndexFunc(log, func(e checkpoint.Entry) bool { return e.Key == keyed.PopulationKey })
			if i < 0 { // no population: a key's written again
				i = slices.IndexFunc(log, func(e checkpoint.Entry) bool {
					return !checkpoint.ReservedKey(e.Key) && slices.ContainsFunc(log[len(log)/2:], func(l checkpoint.Entry) bool { return l.Key == e.Key })
				})
			}
			last := i
			for j := range log {
				if log[j].Key == log[i].Key {
					last = j
				}
			}
			if last == i {
				t.Fatalf("key %q has one record", log[i].Key)
			}
			log[last].Value = log[i].Value // its first record, CRC and all
			return log
		}, true},
		{"an unreadable key record", func(t *testing.T, log []checkpoint.Entry) []checkpoint.Entry {
			i := lastKeyRecord(t, log)
			log[i].Value = append([]byte(nil), log[i].Value...)
			log[i].Value[len(log[i].Value)-1] ^= 0xff
			return log
		}, false},
		{"a zombie's record left alone by compaction", func(t *testing.T, log []checkpoint.Entry) []checkpoint.Entry {
			// The zombie writes a key's state as of an earlier checkpoint
			// (it restored from there): the deterministic state at its
			// applied_through, another than the accepted one.
			i := lastKeyRecord(t, log)
			j := slices.IndexFunc(log[:i], func(e checkpoint.Entry) bool { return e.Key == log[i].Key })
			if j < 0 {
				t.Fatalf("key %q has one record", log[i].Key)
			}
			rec, _ := checkpoint.Decode(log[j].Value)
			newer := checkpoint.NextEpoch(rec.Key.Epoch, 9)
			zombie := *rec.Key
			log = append(log, checkpoint.Entry{Key: "\x00driftstream-owner-" + strconv.FormatUint(uint64(newer), 16), Value: checkpoint.EncodeOwnership(checkpoint.Ownership{Partition: 0, Epoch: newer, Owner: "gen-9"})},
				checkpoint.Entry{Key: zombie.Key, Value: checkpoint.EncodeKey(zombie)})
			return compactLog(log, len(log))
		}, false},
	}
	// A frozen former owner's record of a key that had none at the last
	// marker (it wrote the key first) is no loss: the marker's digest does
	// not count it, so the restore drops it, verified, with no rebuild.
	for _, c := range []struct {
		name string
		cfg  func(t *testing.T) Config
	}{
		{"logreg-additive", func(*testing.T) Config { return shippedConfig(dim) }},
		{"population-off", func(t *testing.T) Config { return testConfig(t, "logreg", "") }},
	} {
		t.Run("a zombie's record of a key new since the marker/"+c.name, func(t *testing.T) {
			h := newHarness(t, 1600, 40, false)
			h.cfg = c.cfg(t)
			h.runUntil(1, 800)
			log := h.store.Log(0)
			rec, _ := checkpoint.Decode(log[lastKeyRecord(t, log)].Value)
			newer := checkpoint.NextEpoch(rec.Key.Epoch, 9)
			zombie := *rec.Key
			zombie.Key = "written-by-the-zombie-first"
			log = append(log, checkpoint.Entry{Key: "\x00driftstream-owner-" + strconv.FormatUint(uint64(newer), 16), Value: checkpoint.EncodeOwnership(checkpoint.Ownership{Partition: 0, Epoch: newer, Owner: "gen-9"})},
				checkpoint.Entry{Key: zombie.Key, Value: checkpoint.EncodeKey(zombie)})
			h.store.SetLog(0, log)
			h.feed.bounded = true
			got := &restoredHook{}
			final := h.runner(10, newGate(1<<62), nil, got)
			if err := final.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got.res.Origin != FromChangelog || !got.res.Verified || got.res.StandInsDropped != 1 || len(got.res.Problems) != 0 {
				t.Fatalf("restored from %v, verified %v, %d stand-ins dropped, problems %v; want from the changelog, verified, 1 dropped, none",
					got.res.Origin, got.res.Verified, got.res.StandInsDropped, got.res.Problems)
			}
			if dups := h.check(final); dups != 0 {
				t.Fatalf("%d predictions repeated", dups)
			}
		})
	}
	configs := []struct {
		name    string
		cfg     func(t *testing.T) Config
		rebuilt bool
	}{
		{"logreg-additive", func(*testing.T) Config { return shippedConfig(dim) }, true},
		{"population-off", func(t *testing.T) Config { return testConfig(t, "logreg", "") }, false},
	}
	for _, d := range damages {
		for _, c := range configs {
			t.Run(d.name+"/"+c.name, func(t *testing.T) {
				h := newHarness(t, 1600, 40, false)
				h.cfg = c.cfg(t)
				h.runUntil(1, 800)
				h.store.SetLog(0, d.damage(t, h.store.Log(0)))
				h.feed.bounded = true
				got := &restoredHook{}
				final := h.runner(10, newGate(1<<62), nil, got)
				if err := final.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				want := map[bool]Origin{true: FromInputs, false: FromChangelog}[c.rebuilt || d.mismatch]
				problems := map[bool]int{true: 0, false: 1}[d.mismatch]
				if got.res.Origin != want || len(got.res.Problems) != problems || got.res.Mismatch != d.mismatch || got.res.Verified {
					t.Fatalf("restored from %v with %d problems (%v), digest mismatch %v, verified %v; want from %v with %d, mismatch %v, not verified",
						got.res.Origin, len(got.res.Problems), got.res.Problems, got.res.Mismatch, got.res.Verified, want, problems, d.mismatch)
				}
				if dups := h.check(final); dups != 0 {
					t.Fatalf("%d predictions repeated", dups)
				}
			})
		}
	}
}

// lastKeyRecord is the position of the log's last record of an entity key.
func lastKeyRecord(t *testing.T, log []checkpoint.Entry) int {
	t.Helper()
	for i := len(log) - 1; i >= 0; i-- {
		if !checkpoint.ReservedKey(log[i].Key) && log[i].Key != keyed.PopulationKey {
			return i
		}
	}
	t.Fatal("no key record in the log")
	return 0
}
