package service

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/driftstream/driftstream/pipeline"
)

// counters are the service's counts, kept once: the partitions' own
// (each running partition's Runner publishes a pipeline.Snapshot; a
// stopped partition's final counts are retired into one sum) and the few
// that belong to the service rather than to a partition. Metrics, Totals
// and the API read them; nothing copies them.
type counters struct {
	mu      sync.Mutex
	retired pipeline.Totals // partitions stopped in this process
	live    map[int]*pipeline.Runner

	// refused counts outputs the broker refused, each replaced by a dead
	// letter, by output kind and reason.
	refused map[refusal]int64

	resumed, unparked, caughtUp, parkedRefused atomic.Int64
	// torn counts the key records of torn checkpoints set aside by restores
	// and catch-ups.
	torn atomic.Int64
	// rebuilt counts the partitions rebuilt from their input topics, as
	// the changelog could not restore them exactly.
	rebuilt atomic.Int64
	// verified and mismatched count the restores and catch-ups whose
	// state's digest was, and was not, their last checkpoint's.
	verified, mismatched atomic.Int64

	// merges counts, per partition, the times its merge of the events and
	// labels topics went on without a caught-up one after DRIFTSTREAM_MERGE_WAIT
	// (pipeline.Merge).
	merges map[int]int64
}

// wentOn counts a merge of partition p that went on without an input.
func (c *counters) wentOn(p int) {
	c.mu.Lock()
	c.merges[p]++
	c.mu.Unlock()
}

// mergesWentOn is a copy of the merges' counts by partition.
func (c *counters) mergesWentOn() map[int]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.merges)
}

// refusal is an output kind and the reason the broker refused it.
type refusal struct{ kind, reason string }

// refusedReasons are the reasons of a refused output.
var refusedReasons = []string{pipeline.ReasonOutputTooLarge, pipeline.ReasonOutputInvalid}

func newCounters() *counters {
	return &counters{live: map[int]*pipeline.Runner{}, refused: map[refusal]int64{}, merges: map[int]int64{}}
}

// start counts partition p's records from its Runner r.
func (c *counters) start(p int, r *pipeline.Runner) {
	c.mu.Lock()
	c.live[p] = r
	c.mu.Unlock()
}

// stop retires partition p's counts once its Runner has returned.
func (c *counters) stop(p int, r *pipeline.Runner) {
	t := r.Snapshot().Totals
	t.KeysInWarning = 0 // a level: the partition's keys are no longer here
	c.mu.Lock()
	c.retired.Add(t)
	delete(c.live, p)
	c.mu.Unlock()
}

// partitionSnapshot is one running partition's snapshot.
type partitionSnapshot struct {
	p    int
	snap pipeline.Snapshot
}

// read returns the counts summed over every partition this process ran,
// and each running partition's snapshot, in partition order.
func (c *counters) read() (sum pipeline.Totals, parts []partitionSnapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sum = c.retired
	for p, r := range c.live {
		s := r.Snapshot()
		sum.Add(s.Totals)
		parts = append(parts, partitionSnapshot{p: p, snap: s})
	}
	slices.SortFunc(parts, func(a, b partitionSnapshot) int { return a.p - b.p })
	return sum, parts
}

// refusedOutput counts an output the broker refused, replaced by a dead
// letter.
func (c *counters) refusedOutput(kind, reason string) {
	c.mu.Lock()
	c.refused[refusal{kind, reason}]++
	c.mu.Unlock()
}

// refusals returns the refused outputs' counts, with every known kind and
// reason present (at 0 when none).
func (c *counters) refusals() map[refusal]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[refusal]int64, len(c.refused)+8)
	for _, kind := range pipeline.OutputKinds {
		for _, reason := range refusedReasons {
			out[refusal{kind, reason}] = 0
		}
	}
	for k, n := range c.refused {
		out[k] = n
	}
	return out
}

// refusedTotal is the number of refused outputs.
func (c *counters) refusedTotal() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, k := range c.refused {
		n += k
	}
	return n
}
