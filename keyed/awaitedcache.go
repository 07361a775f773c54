package keyed

import "encoding/binary"

// awaitedCache is a key's changelog encoding of its oldest awaited events,
// kept from one checkpoint of the key to the next: an event that waits
// through many checkpoints (a label late by thousands of events, or one
// that never comes) is encoded once and copied after, instead of read back
// from its pending entry and written again at each (a cache miss per event:
// 7–9% of a partition's CPU with late labels, BenchmarkShippedCPU). An
// entry's bytes depend on its event and the event before it alone
// (pendingcodec.go), so the cache stays right across the changes the
// awaited events see: a new event comes last (nothing cached changes), the
// oldest ones go (the first left is written anew, the rest copied), one in
// the middle goes (the cache keeps the events before it).
type awaitedCache struct {
	enc  []byte // cached entries, appendAwaited's layout without the count
	ends []int  // ends[j]: where cached entry j ends in enc
	// gone is how many cached entries were dropped from the front of the
	// pending events since: pending[i] is cached entry gone+i.
	gone int
}

// dropFront tells the cache that the n oldest awaited events went.
func (c *awaitedCache) dropFront(n int) {
	if c.gone += n; c.gone >= len(c.ends) {
		c.reset()
	}
}

// drop tells the cache that awaited event i went.
func (c *awaitedCache) drop(i int) {
	switch {
	case i == 0:
		c.dropFront(1)
	case c.gone+i < len(c.ends): // the events before it stay cached
		c.ends = c.ends[:c.gone+i]
		c.enc = c.enc[:c.ends[c.gone+i-1]]
	}
}

// reset empties the cache.
func (c *awaitedCache) reset() { c.enc, c.ends, c.gone = c.enc[:0], c.ends[:0], 0 }

// appendChangelog appends the awaited events' section of a changelog
// record (appendAwaited's bytes with omit) to b, copying what the cache
// holds and encoding the rest, which it then caches.
func (lw *labelWait) appendChangelog(b []byte) []byte {
	c, pend := &lw.cache, lw.pending
	b = binary.AppendUvarint(b, uint64(len(pend)))
	start := len(b)
	k := len(c.ends) - c.gone // pending[:k] are cached
	var w awaitedWriter
	switch {
	case k == 0:
		c.reset()
	case c.gone == 0:
		b = append(b, c.enc[:c.ends[k-1]]...)
		w.follow(&pend[k-1])
	default: // the first event's predecessor went: it is written anew, the others copied
		b = w.entry(b, &pend[0], true)
		first, from := len(b)-start, c.ends[c.gone]
		b = append(b, c.enc[from:c.ends[c.gone+k-1]]...)
		c.ends[0] = first
		for j := 1; j < k; j++ {
			c.ends[j] = c.ends[c.gone+j] - from + first
		}
		c.ends, c.gone = c.ends[:k], 0
		c.enc = append(c.enc[:0], b[start:]...)
		w.follow(&pend[k-1])
	}
	cached := len(b)
	for i := k; i < len(pend); i++ {
		b = w.entry(b, &pend[i], true)
		c.ends = append(c.ends, len(b)-start)
	}
	c.enc = append(c.enc, b[cached:]...)
	return b
}
