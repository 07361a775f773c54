package pipeline

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// mergeLogs are k inputs' records (Topic: the input), timestamps drawn
// so that they interleave, tie across the inputs now and then, and go back
// within an input now and then (a producer's clock).
func mergeLogs(seed uint64, k, n int) [][]Fetched {
	r := rand.New(rand.NewPCG(seed, 5))
	logs := make([][]Fetched, k)
	base := time.Unix(1_700_000_000, 0)
	for topic := range k {
		ms := 0
		for off := range n {
			ms += r.IntN(40)
			t := ms
			if r.IntN(20) == 0 {
				t -= r.IntN(200) // back in time
			}
			logs[topic] = append(logs[topic], Fetched{Record: Record{Topic: topic, Offset: int64(off), Time: base.Add(time.Duration(t) * time.Millisecond)}, HighWatermark: int64(n)})
		}
	}
	return logs
}

// greedy is the merge order by definition: of the inputs' next records,
// the earliest timestamp, a tie to the input listed first.
func greedy(logs [][]Fetched) []Fetched {
	logs = slices.Clone(logs)
	var out []Fetched
	for {
		pick := -1
		for i, l := range logs {
			if len(l) > 0 && (pick < 0 || l[0].Time.Before(logs[pick][0].Time)) {
				pick = i
			}
		}
		if pick < 0 {
			return out
		}
		out, logs[pick] = append(out, logs[pick][0]), logs[pick][1:]
	}
}

// deliver sends log's records to ch in random batch sizes at random moments,
// with idle reports between them, then closes ch when closeAtEnd.
func deliver(r *rand.Rand, log []Fetched, ch chan<- []Fetched, closeAtEnd bool) {
	for len(log) > 0 {
		n := min(len(log), 1+r.IntN(30))
		ch <- log[:n:n]
		log = log[n:]
		if r.IntN(3) == 0 {
			time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
		}
	}
	if closeAtEnd {
		close(ch)
	}
}

func collect(out <-chan []Fetched) []Fetched {
	var got []Fetched
	for b := range out {
		for _, f := range b {
			if f.Idle {
				panic("an Idle report left the merge")
			}
		}
		got = append(got, b...)
	}
	return got
}

func offsets(fs []Fetched) [][2]int64 {
	out := make([][2]int64, len(fs))
	for i, f := range fs {
		out[i] = [2]int64{int64(f.Topic), f.Offset}
	}
	return out
}

// Whatever the batches and the timing of the inputs (two, as the events
// and labels topics, or more), a merge that waits for them (as a
// backtest's, or a service's whose inputs keep up) gives the greedy order
// of the logs; from any prefix of it (a checkpoint's positions), the rest
// of it.
func TestMergeIsAFunctionOfTheLogs(t *testing.T) {
	for seed := uint64(1); seed <= 24; seed++ {
		k := 2 + int(seed%4)
		logs := mergeLogs(seed, k, 300)
		want := greedy(logs)
		cut := int(seed * 13 % uint64(300*k))
		from := make([]int64, k)
		for _, f := range want[:cut] {
			from[f.Topic] = f.Offset + 1
		}
		r := rand.New(rand.NewPCG(seed, 9))
		in := make([]<-chan []Fetched, k)
		for i := range in {
			ch := make(chan []Fetched, r.IntN(3))
			in[i] = ch
			go deliver(rand.New(rand.NewPCG(seed, uint64(i))), logs[i][from[i]:], ch, true)
		}
		out := make(chan []Fetched, 2)
		went := 0
		go Merge(context.Background(), in, from, -1, 1+r.IntN(64), out, func(int, int64, int64) { went++ })
		got := collect(out)
		if !slices.Equal(offsets(got), offsets(want[cut:])) || went != 0 {
			t.Fatalf("seed %d, %d inputs from %v: the merge differs from the logs' greedy order (%d records, want %d; went on %d times)", seed, k, from, len(got), len(want)-cut, went)
		}
	}
}

// The merge waits as Kafka Streams does (KIP-695): for an input that may
// have records on the broker it has not delivered (its end unknown, or past
// its position) for as long as it takes, whatever the wait, and never goes
// on without it; for a caught-up one, the wait: 0 not at all, positive that
// long and then on, counted once, until it delivers a record (its Idle
// reports meanwhile change nothing), negative for ever.
func TestMergeWaitsForRecordsOnTheBroker(t *testing.T) {
	rec := func(topic int, off int64, ms int) Fetched {
		return Fetched{Record: Record{Topic: topic, Offset: off, Time: time.UnixMilli(int64(ms))}, HighWatermark: 100}
	}
	idle := func(end int64) []Fetched {
		return []Fetched{{Record: Record{Topic: 1, Offset: 7}, HighWatermark: end, Idle: true}}
	}
	const wait = 200 * time.Millisecond
	for _, tc := range []struct {
		name   string
		wait   time.Duration
		labels []Fetched // sent on the labels input before the events
		// goesOn: the events go out without the labels input, after at
		// least minDelay; else they wait until it delivers.
		goesOn   bool
		minDelay time.Duration
		wentOn   int64
	}{
		{"caught up, wait 0: not waited", 0, idle(7), true, 0, 0},
		{"caught up: the wait, then on", wait, idle(7), true, wait, 1},
		{"caught up, negative wait: for ever", -1, idle(7), false, 0, 0},
		{"records on the broker: until they come", wait, idle(9), false, 0, 0},
		{"records on the broker, wait 0: until they come", 0, idle(9), false, 0, 0},
		{"end unknown: until it is known", wait, nil, false, 0, 0},
	} {
		var in [2]chan []Fetched
		in[0], in[1] = make(chan []Fetched, 4), make(chan []Fetched, 4)
		if tc.labels != nil {
			in[1] <- tc.labels
		}
		var went atomic.Int64
		out := make(chan []Fetched, 4)
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		go Merge(ctx, []<-chan []Fetched{in[0], in[1]}, []int64{0, 7}, tc.wait, 64, out, func(int, int64, int64) { went.Add(1) })
		in[0] <- []Fetched{rec(0, 0, 10), rec(0, 1, 20)}
		if tc.goesOn {
			got := <-out
			if waited := time.Since(start); len(got) != 2 || waited < tc.minDelay {
				t.Errorf("%s: %d records after %s (want 2 after at least %s)", tc.name, len(got), waited, tc.minDelay)
			}
			in[1] <- idle(7) // an Idle report neither ends going on nor counts again
			in[0] <- []Fetched{rec(0, 2, 22)}
			if b := <-out; len(b) != 1 || b[0].Offset != 2 {
				t.Errorf("%s: after an Idle report: %v", tc.name, offsets(b))
			}
			// The labels input delivers: merged by time again, no further count.
			in[1] <- []Fetched{rec(1, 7, 25)}
			for len(in[1]) > 0 { // taken before the next event, or that event may go out first
				time.Sleep(time.Millisecond)
			}
			in[0] <- []Fetched{rec(0, 3, 30)}
			if b := <-out; len(b) != 1 || b[0].Topic != 1 {
				t.Errorf("%s: after the labels came back: %v", tc.name, offsets(b))
			}
		} else {
			select {
			case b := <-out:
				t.Errorf("%s: %v went out without the labels input", tc.name, offsets(b))
			case <-time.After(3 * wait):
			}
			// The labels input delivers: everything in time order.
			in[1] <- []Fetched{rec(1, 7, 15), rec(1, 8, 40)}
			var got []Fetched
			for len(got) < 3 {
				got = append(got, <-out...)
			}
			if len(got) != 3 || got[0].Offset != 0 || got[1].Topic != 1 || got[2].Offset != 1 {
				t.Errorf("%s: after the labels came: %v", tc.name, offsets(got))
			}
		}
		if went.Load() != tc.wentOn {
			t.Errorf("%s: went on %d times, want %d", tc.name, went.Load(), tc.wentOn)
		}
		cancel()
	}
}

// Each wait for a caught-up input is the whole wait, also when it starts
// as the last one ends: a deadline left from an earlier wait (the first
// design kept it while the merge stayed busy) runs out early and reorders
// records the input was about to deliver.
func TestMergeWaitsAfreshEachTime(t *testing.T) {
	const wait = 300 * time.Millisecond
	rec := func(topic int, off int64, ms int, end int64) Fetched {
		return Fetched{Record: Record{Topic: topic, Offset: off, Time: time.UnixMilli(int64(ms))}, HighWatermark: end}
	}
	var in [2]chan []Fetched
	in[0], in[1] = make(chan []Fetched, 4), make(chan []Fetched, 4)
	out := make(chan []Fetched, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var went atomic.Int64
	go Merge(ctx, []<-chan []Fetched{in[0], in[1]}, []int64{0, 0}, wait, 64, out, func(int, int64, int64) { went.Add(1) })
	// Two events (the events topic caught up after them) wait for the
	// caught-up labels topic; a label comes late in the wait.
	in[1] <- []Fetched{{Record: Record{Topic: 1}, Idle: true}}
	in[0] <- []Fetched{rec(0, 0, 10, 2), rec(0, 1, 1000, 2)}
	time.Sleep(wait * 8 / 10)
	sent := time.Now()
	in[1] <- []Fetched{rec(1, 0, 12, 1)}
	var got []Fetched
	for len(got) < 2 {
		got = append(got, <-out...)
	}
	if len(got) != 2 || got[0].Topic != 0 || got[1].Topic != 1 {
		t.Fatalf("the first event and the label: %v", offsets(got))
	}
	// The second event waits the whole wait again, from the label on.
	b := <-out
	if waited := time.Since(sent); len(b) != 1 || b[0].Offset != 1 || waited < wait*9/10 {
		t.Errorf("the second event went out %s after the label (want the wait, %s): %v", waited, wait, offsets(b))
	}
	if went.Load() != 1 {
		t.Errorf("went on %d times, want 1", went.Load())
	}
}

// With more than two inputs, each is waited for by the same rule: a
// caught-up one (wait 0) is passed, one whose end is unknown holds the
// merge until it delivers, and a read error at an input's head goes out
// at once, even while another is waited for.
func TestMergeOfSeveralWaitsForEach(t *testing.T) {
	rec := func(topic int, off int64, ms int) Fetched { // the input caught up after it
		return Fetched{Record: Record{Topic: topic, Offset: off, Time: time.UnixMilli(int64(ms))}, HighWatermark: off + 1}
	}
	in := make([]chan []Fetched, 4)
	ro := make([]<-chan []Fetched, 4)
	for i := range in {
		in[i] = make(chan []Fetched, 4)
		ro[i] = in[i]
	}
	out := make(chan []Fetched, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Merge(ctx, ro, []int64{0, 0, 0, 0}, 0, 64, out, nil)
	in[1] <- []Fetched{{Record: Record{Topic: 1}, Idle: true}} // caught up
	in[0] <- []Fetched{rec(0, 0, 10)}
	// Input 2 says nothing: the merge waits, except for a read error.
	boom := errors.New("boom")
	in[3] <- []Fetched{{Record: Record{Topic: 3}, Err: boom}}
	if b := <-out; len(b) != 1 || !errors.Is(b[0].Err, boom) {
		t.Fatalf("the read error: %v", offsets(b))
	}
	in[3] <- []Fetched{rec(3, 0, 30)}
	select {
	case b := <-out:
		t.Fatalf("went out while input 2 is waited for: %v", offsets(b))
	case <-time.After(100 * time.Millisecond):
	}
	in[2] <- []Fetched{rec(2, 0, 5)}
	var got []Fetched
	for len(got) < 3 {
		got = append(got, <-out...)
	}
	if want := [][2]int64{{2, 0}, {0, 0}, {3, 0}}; !slices.Equal(offsets(got), want) {
		t.Fatalf("merged %v, want %v", offsets(got), want)
	}
}

// A read error goes out at once, ending its batch; a cancelled merge
// returns without closing out.
func TestMergePassesErrorsOn(t *testing.T) {
	var in [2]chan []Fetched
	in[0], in[1] = make(chan []Fetched, 4), make(chan []Fetched, 4)
	out := make(chan []Fetched, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Merge(ctx, []<-chan []Fetched{in[0], in[1]}, []int64{0, 0}, -1, 64, out, nil); close(done) }()
	boom := errors.New("fetch failed")
	in[1] <- []Fetched{{Err: boom}}
	if b := <-out; len(b) != 1 || !errors.Is(b[0].Err, boom) {
		t.Fatalf("got %+v, want the error alone", b)
	}
	cancel()
	<-done
	select {
	case _, ok := <-out:
		if !ok {
			t.Fatal("a cancelled merge closed its output")
		}
	default:
	}
}
