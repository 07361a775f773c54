package pipeline

import (
	"context"
	"time"
)

// Merge interleaves a partition's two inputs (the events topic's records,
// the labels topic's) into one stream in a deterministic order, as Kafka
// Streams orders a task's partitions: of the two inputs' next records, the
// one with the smaller log timestamp goes first, a tie to the events topic,
// and within an input the log's order is kept (a timestamp that goes back
// is merged by the same rule, so the order stays a function of the logs).
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
// waited for. So the merged order is a pure function of the two logs as
// they stood when read, from the positions the merge started at: records
// of one topic that reach the broker after the merge has passed their
// timestamp on the other are merged after it (live operation), and a
// replay of the logs may then order them otherwise.
//
// Merge reads the inputs until both are closed or ctx ends, and sends the
// merged records to out in batches of at most maxBatch, never Idle ones; a
// read error (Fetched.Err) is passed on at once, ending its batch. It
// closes out when both inputs are closed and drained.
func Merge(ctx context.Context, inputs [2]<-chan []Fetched, from [2]int64, wait time.Duration, maxBatch int, out chan<- []Fetched, wentOn func(input int, next, end int64)) {
	m := merge{in: inputs, wait: wait, out: out, wentOn: wentOn, maxBatch: max(maxBatch, 1)}
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
	q    []Fetched
	next int64 // the offset after the last record seen (or the start)
	end  int64 // the input's end at its last fetch, once known
	// known: a fetch has reported the input's end; closed: the channel
	// closed (a bounded input, read to its end); goneOn: the merge went on
	// without the caught-up input after the wait, until it delivers a
	// record.
	known, closed, goneOn bool
}

// caughtUp reports whether the input's last fetch reached its end: no
// record it has not delivered was on the broker then.
func (in *mergeInput) caughtUp() bool { return in.known && in.next >= in.end }

type merge struct {
	in       [2]<-chan []Fetched
	st       [2]mergeInput
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

// run merges until both inputs are closed and drained (true) or ctx ends.
func (m *merge) run(ctx context.Context) bool {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	// The caught-up input waited for (−1: none), and when its wait ends: a
	// wait starts when the merge first finds nothing to send for it, and
	// ends when the merge sends a batch (a deadline left from an earlier
	// wait would go on at once: the first design's bug, which made a 1 s
	// wait on records still to be fetched run out in no time).
	waitingFor, deadline := -1, time.Time{}
	for {
		if batch := m.take(); len(batch) > 0 {
			waitingFor = -1
			select {
			case m.out <- batch:
			case <-ctx.Done():
				return false
			}
			continue
		}
		a, b := &m.st[0], &m.st[1]
		if a.closed && b.closed {
			return true
		}
		// Nothing can go out: one input has records and the other is
		// waited for (its records meanwhile buffer, up to a batch), or
		// neither has any.
		waiting := -1
		switch {
		case len(a.q) > 0 && !m.passable(1):
			waiting = 1
		case len(b.q) > 0 && !m.passable(0):
			waiting = 0
		}
		var expired <-chan time.Time
		idle := -1 // the waited input when caught up: its wait is bounded
		if waiting >= 0 && m.st[waiting].caughtUp() && m.wait > 0 {
			idle = waiting
		}
		if idle != waitingFor {
			waitingFor, deadline = idle, time.Now().Add(m.wait)
		}
		if idle >= 0 {
			timer.Reset(time.Until(deadline))
			expired = timer.C
		}
		var in0, in1 <-chan []Fetched
		if !a.closed && (waiting != 1 || len(a.q) < m.maxBatch) {
			in0 = m.in[0]
		}
		if !b.closed && (waiting != 0 || len(b.q) < m.maxBatch) {
			in1 = m.in[1]
		}
		select {
		case batch, ok := <-in0:
			m.receive(0, batch, ok)
		case batch, ok := <-in1:
			m.receive(1, batch, ok)
		case <-expired:
			st := &m.st[idle]
			st.goneOn, waitingFor = true, -1
			if m.wentOn != nil {
				m.wentOn(idle, st.next, st.end)
			}
		case <-ctx.Done():
			return false
		}
		timer.Stop()
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
		st.q = append(st.q, f)
	}
}

// take is the next batch that can go out: records in merge order while
// either both inputs have one or the other may be gone on without
// (passable); a read error at the head of an input goes out at once, alone
// at its batch's end.
func (m *merge) take() []Fetched {
	a, b := &m.st[0], &m.st[1]
	var batch []Fetched
	for len(batch) < m.maxBatch {
		var pick *mergeInput
		switch {
		case len(a.q) > 0 && a.q[0].Err != nil:
			pick = a
		case len(b.q) > 0 && b.q[0].Err != nil:
			pick = b
		case len(a.q) > 0 && len(b.q) > 0:
			pick = a
			if b.q[0].Time.Before(a.q[0].Time) {
				pick = b
			}
		case len(a.q) > 0 && m.passable(1):
			pick = a
		case len(b.q) > 0 && m.passable(0):
			pick = b
		default:
			return batch
		}
		f := pick.q[0]
		pick.q[0] = Fetched{} // drop the buffer's references
		pick.q = pick.q[1:]
		batch = append(batch, f)
		if f.Err != nil {
			return batch
		}
	}
	return batch
}
