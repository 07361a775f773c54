package pipeline

import (
	"context"
	"testing"
	"time"
)

// BenchmarkMerge merges two inputs (the events and labels topics) of
// interleaved records delivered in fetches of 512: the cost per record of
// the merge alone.
func BenchmarkMerge(b *testing.B) {
	const n, fetch = 200_000, 512
	var logs [2][]Fetched
	base := time.Unix(1_700_000_000, 0)
	for topic := range 2 {
		for off := range n {
			logs[topic] = append(logs[topic], Fetched{Record: Record{Topic: topic, Offset: int64(off), Time: base.Add(time.Duration(2*off+topic) * time.Millisecond)}, HighWatermark: n})
		}
	}
	b.ResetTimer()
	for range b.N {
		var in [2]chan []Fetched
		for i := range in {
			in[i] = make(chan []Fetched, 4)
			go func() {
				for l := logs[i]; len(l) > 0; {
					k := min(fetch, len(l))
					in[i] <- l[:k:k]
					l = l[k:]
				}
				close(in[i])
			}()
		}
		out := make(chan []Fetched, 4)
		go Merge(context.Background(), []<-chan []Fetched{in[0], in[1]}, []int64{0, 0}, 0, 512, out, nil)
		got := 0
		for batch := range out {
			got += len(batch)
		}
		if got != 2*n {
			b.Fatalf("%d records merged, want %d", got, 2*n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*n), "ns/record")
}
