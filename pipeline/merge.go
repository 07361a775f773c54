package pipeline

import (
	"context"
	"reflect"
	"time"
)

// Merge interleaves the inputs of a partition (the events topic's records,
// the labels topic's, and any other log read beside them) into one stream
// in a deterministic order, as Kafka Streams orders a task's partitions: of
// the inputs' next records, the one with the smallest log timestamp goes
// first, a tie to the input listed first, and within an input the log's
// order is kept (a timestamp that goes back is merged by the same rule, so
// the order stays a function of the logs).
//
// An input with no buffered record is waited for as Kafka Streams waits
// (KIP-695): for as long as it takes while it may have records on the
// broker that it has not delivered (no fetch has reported its end yet, or
// its last fetch ended before its end): a fetch that cannot be served
// comes back as a read error, which fails the partition for a retry rather
// than changing the order. An input that is caught up (its last fetch, or
// an Idle report, reached its end) is waited for up to wait, for records
// still to reach the broker: 0 (the default) not at all, a negative wait for
// ever. When that wait runs out, the merge goes on without the input until
// it delivers a record, and wentOn is called with the input and its
// position. A closed channel (a bounded input, read to its end) is never
// waited for. So the merged order is a pure function of the logs as they
// stood when read, from the positions the merge started at (from, one per
// input): records of one log that reach the broker after the merge has
// passed their timestamp on another are merged after it (live operation),
// and a replay of the logs may then order them otherwise.
//
// Merge reads the inputs until all are closed or ctx ends, and sends the
// merged records to out in batches of at most maxBatch, never Idle ones; a
// read error (Fetched.Err) is passed on at once, ending its batch. It
// closes out when every input is closed and drained. Choosing a record
// costs a look at each input's next one: Merge is for a few inputs.
func Merge(ctx context.Context, inputs []<-chan []Fetched, from []int64, wait time.Duration, maxBatch int, out chan<- []Fetched, wentOn func(input int, next, end int64)) {
	m := merge{in: inputs, st: make([]mergeInput, len(inputs)), wait: wait, out: out, wentOn: wentOn, maxBatch: max(maxBatch, 1)}
	for i := range m.st {
		m.st[i].next = from[i]
	}
	if m.run(ctx) {
		close(out)
	}
}

// mergeInput is one input's buffered records and what the merge knows of
// its position.
type mergeInput struct {
	// buf[head:] are the records buffered, oldest first; the slice is
	// reused from its start once drained.
	buf  []Fetched
	head int
	next int64 // the offset after the last record seen (or the start)
	end  int64 // the input's end at its last fetch, once known
	// known: a fetch has reported the input's end; closed: the channel
	// closed (a bounded input, read to its end); goneOn: the merge went on
	// without the caught-up input after the wait, until it delivers a
	// record.
	known, closed, goneOn bool
}

// buffered is how many records the input has buffered.
func (in *mergeInput) buffered() int { return len(in.buf) - in.head }

// peek is the input's next record; it has one.
func (in *mergeInput) peek() *Fetched { return &in.buf[in.head] }

// pop takes the input's next record out.
func (in *mergeInput) pop() Fetched {
	f := in.buf[in.head]
	in.buf[in.head] = Fetched{} // drop the buffer's references
	if in.head++; in.head == len(in.buf) {
		in.buf, in.head = in.buf[:0], 0
	}
	return f
}

// push buffers f, moving the records down first when more than half of
// the slice before them is drained.
func (in *mergeInput) push(f Fetched) {
	if in.head > 64 && 2*in.head > len(in.buf) {
		n := copy(in.buf, in.buf[in.head:])
		clear(in.buf[n:])
		in.buf, in.head = in.buf[:n], 0
	}
	in.buf = append(in.buf, f)
}

// caughtUp reports whether the input's last fetch reached its end: no
// record it has not delivered was on the broker then.
func (in *mergeInput) caughtUp() bool { return in.known && in.next >= in.end }

type merge struct {
	in       []<-chan []Fetched
	st       []mergeInput
	wait     time.Duration
	maxBatch int
	out      chan<- []Fetched
	wentOn   func(input int, next, end int64)
}

// passable reports whether the merge may go on without input i when it
// has no record buffered.
func (m *merge) passable(i int) bool {
	in := &m.st[i]
	return in.closed || in.goneOn || in.caughtUp() && m.wait == 0
}

// The select's fixed cases, before one receive case per input.
const (
	caseDone = iota
	caseExpired
	caseInputs
)

// run merges until every input is closed and drained (true) or ctx ends.
func (m *merge) run(ctx context.Context) bool {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	cases := make([]reflect.SelectCase, caseInputs+len(m.in))
	cases[caseDone] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	cases[caseExpired] = reflect.SelectCase{Dir: reflect.SelectRecv}
	inputs := make([]reflect.Value, len(m.in))
	for i, ch := range m.in {
		inputs[i] = reflect.ValueOf(ch)
		cases[caseInputs+i] = reflect.SelectCase{Dir: reflect.SelectRecv}
	}
	// The wait for caught-up inputs: it starts when the merge first finds
	// nothing to send because of them alone, and ends when the merge sends a
	// batch (a deadline left from an earlier wait would go on at once: the
	// first design's bug, which made a 1 s wait on records still to be
	// fetched run out in no time).
	bounded, deadline := false, time.Time{}
	var waiting []int
	for {
		if batch := m.take(); len(batch) > 0 {
			bounded = false
			select {
			case m.out <- batch:
			case <-ctx.Done():
				return false
			}
			continue
		}
		// Nothing can go out: an input has records and others are waited
		// for (the records meanwhile buffer, up to a batch an input), or
		// none has any.
		open, buffered := false, false
		waiting = waiting[:0]
		for i := range m.st {
			st := &m.st[i]
			open = open || !st.closed
			switch {
			case st.buffered() > 0:
				buffered = true
			case !m.passable(i):
				waiting = append(waiting, i)
			}
		}
		if !open {
			return true
		}
		if !buffered {
			waiting = waiting[:0]
		}
		// The wait is bounded when every input waited for is caught up.
		idle := len(waiting) > 0 && m.wait > 0
		for _, i := range waiting {
			idle = idle && m.st[i].caughtUp()
		}
		if idle != bounded {
			bounded, deadline = idle, time.Now().Add(m.wait)
		}
		cases[caseExpired].Chan = reflect.Value{}
		if bounded {
			timer.Reset(time.Until(deadline))
			cases[caseExpired].Chan = reflect.ValueOf(timer.C)
		}
		for i := range m.st {
			st := &m.st[i]
			cases[caseInputs+i].Chan = reflect.Value{}
			if !st.closed && (len(waiting) == 0 || st.buffered() < m.maxBatch) {
				cases[caseInputs+i].Chan = inputs[i]
			}
		}
		chosen, v, ok := reflect.Select(cases)
		timer.Stop()
		switch chosen {
		case caseDone:
			return false
		case caseExpired:
			bounded = false
			for _, i := range waiting {
				st := &m.st[i]
				st.goneOn = true
				if m.wentOn != nil {
					m.wentOn(i, st.next, st.end)
				}
			}
		default:
			var batch []Fetched
			if ok {
				batch = v.Interface().([]Fetched)
			}
			m.receive(chosen-caseInputs, batch, ok)
		}
	}
}

// receive buffers a batch of input i (ok false: its channel closed).
func (m *merge) receive(i int, batch []Fetched, ok bool) {
	st := &m.st[i]
	if !ok {
		st.closed = true
		return
	}
	for _, f := range batch {
		if f.Idle {
			st.next, st.end, st.known = f.Offset, f.HighWatermark, true
			continue
		}
		if f.Err == nil {
			st.next, st.end, st.known = f.Offset+1, f.HighWatermark, true
		}
		st.goneOn = false
		st.push(f)
	}
}

// take is the next batch that can go out: records in merge order while
// every input has one or may be gone on without (passable); a read error
// at the head of an input goes out at once, alone at its batch's end.
func (m *merge) take() []Fetched {
	var batch []Fetched
	for len(batch) < m.maxBatch {
		pick := m.errored()
		if pick < 0 {
			pick = m.earliest()
		}
		if pick < 0 {
			return batch
		}
		if batch == nil { // sized once: at most what is buffered
			n := 0
			for i := range m.st {
				n += m.st[i].buffered()
			}
			batch = make([]Fetched, 0, min(n, m.maxBatch))
		}
		f := m.st[pick].pop()
		batch = append(batch, f)
		if f.Err != nil {
			return batch
		}
	}
	return batch
}

// errored is the first input with a read error at its head, −1 if none.
func (m *merge) errored() int {
	for i := range m.st {
		if st := &m.st[i]; st.buffered() > 0 && st.peek().Err != nil {
			return i
		}
	}
	return -1
}

// earliest is the input whose next record goes next: the smallest
// timestamp, a tie to the first input; −1 when an input without a record
// is waited for, or none has one.
func (m *merge) earliest() int {
	pick := -1
	for i := range m.st {
		st := &m.st[i]
		switch {
		case st.buffered() == 0 && !m.passable(i):
			return -1
		case st.buffered() == 0:
		case pick < 0 || st.peek().Time.Before(m.st[pick].peek().Time):
			pick = i
		}
	}
	return pick
}
