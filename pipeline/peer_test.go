package pipeline

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/topics"
)

// sharedConfig is the additive model with its shared part across
// partitions.
func sharedConfig(t *testing.T) Config {
	t.Helper()
	cfg := additiveConfig(t, "logreg", "")
	cfg.SharedAcrossPartitions = true
	return cfg
}

// partitioned deals recs (one partition's offsets, events topic) over
// parts partitions by key, numbering each partition's records of each
// topic from 0 (label records on the labels topic when separate): the
// stream a worker reading every partition meets, merged in the records'
// order. It returns how many events each partition got with their label
// and without.
func partitioned(recs []Record, parts int, separate bool) (out []Record, labeled, unlabeled []int) {
	next := make([][2]int64, parts)
	labeled, unlabeled = make([]int, parts), make([]int, parts)
	out = make([]Record, len(recs))
	for i, r := range recs {
		h := fnv.New32a()
		h.Write(r.Key)
		p := int(h.Sum32() % uint32(parts))
		ev, err := topics.Decode(r.Value, 0)
		if err == nil && ev.Kind == topics.Input {
			if ev.Label != 0 {
				labeled[p]++
			} else {
				unlabeled[p]++
			}
		}
		if separate && err == nil && ev.Kind == topics.LabelRecord {
			r.Topic = LabelsTopic
		}
		r.Partition, r.Offset = p, next[p][r.Topic]
		next[p][r.Topic]++
		out[i] = r
	}
	return out, labeled, unlabeled
}

// from is whether merged record r is at or past where a source opened at
// start reads its input.
func from(r Record, own int, start From) bool {
	if r.Partition == own {
		return r.Offset >= start.Topics[r.Topic]
	}
	return r.Offset >= start.Peer(r.Partition, r.Topic)
}

// A worker sharing its shared part across partitions learns every labeled
// event of the other partitions once — inline, or joined to its label
// record, each unlabeled one joined, given up or still awaited at the end —
// makes no output for them and keeps none of their keys; crashed at random
// points and restored (its marker holding the other partitions' positions,
// its shared part the offsets it absorbed and the events it awaits), it
// ends bit-identical to an uninterrupted run, having predicted each of its
// own events exactly once; with labels on the events topic and on a labels
// topic of their own.
func TestSharedAcrossPartitionsCrashRestoreIsBitIdentical(t *testing.T) {
	for _, separate := range []bool{false, true} {
		t.Run(fmt.Sprintf("separate=%v", separate), func(t *testing.T) { sharedCrashRestore(t, separate) })
	}
}

func sharedCrashRestore(t *testing.T, separate bool) {
	const parts, own = 3, 1
	cfg := sharedConfig(t)
	recs, labeled, unlabeled := partitioned(records(11, 4000, 30), parts, separate)
	ref, err := NewWorker(cfg, own)
	if err != nil {
		t.Fatal(err)
	}
	outs := run(t, ref, recs)
	ps := ref.keys[keyed.PopulationKey]
	inline, waiting := int64(labeled[0]+labeled[2]), int64(unlabeled[0]+unlabeled[2])
	st := ref.stats
	joined := st.PeerLearned - inline
	if joined <= 0 || joined+st.PeerExpired+int64(ps.PeerAwaiting()) != waiting || st.PeerRejected != 0 || st.Skipped != 0 {
		t.Fatalf("learned %d of the other partitions' labeled events (%d inline), gave up %d, %d awaited (of %d unlabeled); rejected %d, skipped %d",
			st.PeerLearned, inline, st.PeerExpired, ps.PeerAwaiting(), waiting, st.PeerRejected, st.Skipped)
	}
	for _, o := range outs {
		if o.Source.Partition != own {
			t.Fatalf("an output of a record of partition %d", o.Source.Partition)
		}
	}
	for k := range ref.keys {
		for _, r := range recs {
			if string(r.Key) == k && r.Partition != own {
				t.Fatalf("key %s of another partition held", k)
			}
		}
	}
	if ps.PeerApplied(0, EventsTopic) < 0 || ps.PeerApplied(2, EventsTopic) < 0 || ps.PeerApplied(own, EventsTopic) != checkpoint.NoOffset {
		t.Fatal("the shared part does not record the other partitions' offsets")
	}

	// Crashes: each restart resumes every input at the restored cut.
	store, _ := checkpoint.NewFileStore(t.TempDir(), 0)
	r := rand.New(rand.NewPCG(3, 3))
	w, _ := NewWorker(cfg, own)
	preds := map[string]int{}
	count := countPredictions(preds)
	start := From{Topics: [2]int64{0, 0}}
	crashes, committed := 0, [2]int64{}
	var checkpointed [][2]int64 // the other partitions' next offsets at the last checkpoint
	for done := false; !done; {
		stop := 100 + r.IntN(600)
		n := 0
		done = true
		for _, rec := range recs {
			if !from(rec, own, start) {
				continue
			}
			if n == stop {
				done = false
				break
			}
			n++
			if err := w.Process(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
			if n%97 == 0 {
				count(w.TakeOutputs())
				if _, _, err := w.Checkpoint(context.Background(), store); err != nil {
					t.Fatal(err)
				}
				committed = [2]int64{w.Through()[EventsTopic] + 1, w.Through()[LabelsTopic] + 1}
				checkpointed = w.Peers()
			}
		}
		if done {
			count(w.TakeOutputs())
			break
		}
		w.TakeOutputs() // lost in the crash
		crashes++
		w, _ = NewWorker(cfg, own)
		res, err := w.Restore(context.Background(), store)
		if err != nil || len(res.Problems) > 0 {
			t.Fatal(err, res.Problems)
		}
		w.SuppressBelow(committed)
		start = From{Topics: res.From, Peers: w.Peers()}
		if !slices.Equal(start.Peers, checkpointed) {
			t.Fatalf("restored to read the other partitions at %v, checkpointed at %v", start.Peers, checkpointed)
		}
	}
	if crashes < 3 {
		t.Fatalf("%d crashes", crashes)
	}
	sameStates(t, w, ref)
	for _, rec := range recs {
		if ev, _ := topics.Decode(rec.Value, 0); rec.Partition == own && ev.Kind == topics.Input && preds[ev.ID] != 1 {
			t.Fatalf("event %s predicted %d times", ev.ID, preds[ev.ID])
		}
	}
}

// The other partitions' records: a bad one is counted and dead-lettered by
// nobody here (its own partition does); a replayed one is skipped; a label
// on their labels topic joins as one on their events topic; any, when the
// shared part is not shared, is an error.
func TestPeerRecords(t *testing.T) {
	ctx := context.Background()
	peer := func(offset int64, value string) Record {
		return Record{Topic: EventsTopic, Partition: 1, Offset: offset, Key: []byte("other"), Value: []byte(value)}
	}
	label := func(offset int64, value string) Record {
		r := peer(offset, value)
		r.Topic = LabelsTopic
		return r
	}
	w, err := NewWorker(sharedConfig(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{
		peer(0, `{"id":"a","x":[1,0,0,0],"label":1}`),
		peer(1, `{"id":"b","x":[1,0`),                     // malformed
		peer(2, `{"id":"c","x":[1e300,0,0,0],"label":1}`), // over the input bound
		peer(3, `{"id":"d","x":[1,0,0,0]}`),               // no label: awaits it
		peer(4, `{"id":"a","label":-1}`),                  // a's label came inline: nothing awaits
		peer(5, `{"id":"e","x":[0,1,0,0],"label":-1}`),
		peer(5, `{"id":"e","x":[0,1,0,0],"label":-1}`), // again: skipped
		peer(6, `{"id":"d","label":1}`),                // joined
		peer(7, `{"id":"f","x":[0,0,1,0]}`),
		label(0, `{"id":"f","label":-1}`),              // joined from the labels topic
		label(1, `{"id":"g","x":[0,0,1,0],"label":1}`), // not a label record
	} {
		if err := w.Process(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if st := w.stats; st.PeerLearned != 4 || st.PeerRejected != 3 || st.Skipped != 1 || st.DeadLetters != 0 || st.Events != 0 {
		t.Fatalf("learned %d, rejected %d, skipped %d, dead letters %d, events %d; want 4, 3, 1, 0, 0", st.PeerLearned, st.PeerRejected, st.Skipped, st.DeadLetters, st.Events)
	}
	if outs := w.TakeOutputs(); len(outs) != 0 || w.Keys() != 1 {
		t.Fatalf("%d outputs and %d keys, want none and the shared part", len(outs), w.Keys())
	}
	if got := w.Peers(); len(got) != 2 || got[1] != [2]int64{8, 2} || got[0] != [2]int64{0, 0} {
		t.Fatalf("next offsets %v, want [[0 0] [8 2]]", got)
	}
	off, err := NewWorker(additiveConfig(t, "logreg", ""), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Process(ctx, peer(0, `{"id":"a","x":[1,0,0,0],"label":1}`)); err == nil || !strings.Contains(err.Error(), "shared part across partitions is off") {
		t.Fatalf("another partition's record without sharing: %v", err)
	}
}

// The shared part across partitions needs the additive model and raw
// inputs: the other combinations are refused with the reason.
func TestSharedAcrossPartitionsNeedsTheAdditiveModel(t *testing.T) {
	for _, tc := range []struct {
		name        string
		population  string
		standardize bool
	}{
		{"off", keyed.PopulationOff, false}, {"mixture", keyed.PopulationMixture, false}, {"standardized", keyed.PopulationAdditive, true},
	} {
		cfg := sharedConfig(t)
		cfg.Population, cfg.Standardize = tc.population, tc.standardize
		if _, err := NewWorker(cfg, 0); err == nil || !strings.Contains(err.Error(), "shared part across partitions needs") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// A source's inputs come in the order Merge ranks ties in, the one the
// service and the topic backtest share: the partition's own topics, then
// every other partition's by partition, each from where From says.
func TestSourceInputsInTieOrder(t *testing.T) {
	f := From{Topics: [2]int64{7, 3}, Peers: [][2]int64{{5, 1}}}
	for _, tc := range []struct {
		name   string
		labels bool
		peers  []int
		want   []SourceInput
	}{
		{"alone", false, nil, []SourceInput{{EventsTopic, 2, 7}}},
		{"labels topic", true, nil, []SourceInput{{EventsTopic, 2, 7}, {LabelsTopic, 2, 3}}},
		{"shared", false, []int{0, 1, 2}, []SourceInput{{EventsTopic, 2, 7}, {EventsTopic, 0, 5}, {EventsTopic, 1, 0}}},
		{"shared, labels topic", true, []int{0, 1, 2}, []SourceInput{{EventsTopic, 2, 7}, {LabelsTopic, 2, 3},
			{EventsTopic, 0, 5}, {LabelsTopic, 0, 1}, {EventsTopic, 1, 0}, {LabelsTopic, 1, 0}}},
	} {
		if got := f.Inputs(2, tc.labels, tc.peers); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
