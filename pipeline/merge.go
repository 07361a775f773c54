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
// An input with no buffered record is waited for, up to wait (a negative
// wait: for ever), unless it is known to hold nothing more: its last fetch
// reached its end (an Idle report, or a record at its high watermark), or
// its channel closed (a bounded input). When the wait runs out, the merge
// goes on without that input until it delivers again, and wentOn is called
// (the one place the order depends on timing: counted, never silent). When
// both inputs have records, or the waits never run out, the merged order is
// a pure function of the two logs from the positions the merge started at.
//
// Merge reads the inputs until both are closed or ctx ends, and sends the
// merged records to out in batches of at most maxBatch, never Idle ones; a
// read error (Fetched.Err) is passed on at once, ending its batch. It
// closes out when both inputs are closed and drained.
func Merge(ctx context.Context, inputs [2]<-chan []Fetched, from [2]int64, wait time.Duration, maxBatch int, out chan<- []Fetched, wentOn func()) {
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
	end  int64 // the input's end at its last fetch; 0: unknown
	// closed: the channel closed (a bounded input, read to its end); goneOn:
	// the merge went on without the input after a wait, until it delivers.
	closed, goneOn bool
}

// done reports whether nothing more is to be waited for from the input now.
func (in *mergeInput) done() bool { return in.closed || in.goneOn || in.end > 0 && in.next >= in.end }

type merge struct {
	in       [2]<-chan []Fetched
	st       [2]mergeInput
	wait     time.Duration
	maxBatch int
	out      chan<- []Fetched
	wentOn   func()
}

// run merges until both inputs are closed and drained (true) or ctx ends.
func (m *merge) run(ctx context.Context) bool {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	waitingFor, deadline := -1, time.Time{} // the input waited for, since when plus the wait
	for {
		if batch := m.take(); len(batch) > 0 {
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
		case len(a.q) > 0 && !b.done():
			waiting = 1
		case len(b.q) > 0 && !a.done():
			waiting = 0
		}
		var expired <-chan time.Time
		if waiting != waitingFor {
			waitingFor, deadline = waiting, time.Now().Add(m.wait)
		}
		if waiting >= 0 && m.wait >= 0 {
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
			m.st[waiting].goneOn = true
			if m.wentOn != nil {
				m.wentOn()
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
	st.goneOn = false
	for _, f := range batch {
		if f.Idle {
			st.next, st.end = f.Offset, f.HighWatermark
			continue
		}
		if f.Err == nil {
			st.next, st.end = f.Offset+1, f.HighWatermark
		}
		st.q = append(st.q, f)
	}
}

// take is the next batch that can go out: records in merge order while
// either both inputs have one or the other is done; a read error at the
// head of an input goes out at once, alone at its batch's end.
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
		case len(a.q) > 0 && b.done():
			pick = a
		case len(b.q) > 0 && a.done():
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
