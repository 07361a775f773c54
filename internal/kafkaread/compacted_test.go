package kafkaread

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	fetchapi "github.com/segmentio/kafka-go/protocol/fetch"
)

// compactedLog answers fetches as a broker does for a compacted partition:
// a fetch at an offset returns the batch holding it, or the first one
// after, and the batches after it in the same segment only (a broker reads
// one segment per fetch), or just that batch when the fetch allows a byte.
// A batch keeps its offsets (base to last) when compaction removes its
// records, some or all of them.
type compactedLog struct {
	segments [][]compactedBatch
	fetches  int
}

type compactedBatch struct {
	base, last int64
	records    []int64 // the offsets compaction kept
}

func (l *compactedLog) RoundTrip(_ context.Context, _ net.Addr, req protocol.Message) (protocol.Message, error) {
	f, ok := req.(*fetchapi.Request)
	if !ok {
		return nil, fmt.Errorf("unexpected request %T", req)
	}
	if l.fetches++; l.fetches > 10000 {
		return nil, fmt.Errorf("%d fetches: stuck", l.fetches)
	}
	rp := f.Topics[0].Partitions[0]
	var out []protocol.RecordReader
	end := int64(0)
	for _, seg := range l.segments {
		end = seg[len(seg)-1].last + 1
	}
	found := false
	for _, seg := range l.segments {
		for _, b := range seg {
			if found || b.last < rp.FetchOffset {
				continue
			}
			if len(out) > 0 && rp.PartitionMaxBytes == 1 {
				continue
			}
			var recs []protocol.Record
			for _, o := range b.records {
				recs = append(recs, protocol.Record{Offset: o, Key: protocol.NewBytes([]byte("k")), Value: protocol.NewBytes([]byte(fmt.Sprint(o)))})
			}
			out = append(out, &protocol.RecordBatch{BaseOffset: b.base, Records: protocol.NewRecordReader(recs...)})
		}
		if len(out) > 0 {
			found = true
		}
	}
	return &fetchapi.Response{Topics: []fetchapi.ResponseTopic{{Topic: f.Topics[0].Topic, Partitions: []fetchapi.ResponsePartition{{
		Partition: rp.Partition, HighWatermark: end, LastStableOffset: end, RecordSet: protocol.RecordSet{Version: 2, Records: &protocol.RecordStream{Records: out}}}}}}}, nil
}

// A compacted partition whose segments end in batches emptied from some
// offset on (their last records removed; a broker still answers a fetch
// there with that batch alone): Follow reads every record kept, in order,
// from the start and from inside such a batch, without a fetch per removed
// offset. (kafka-go's protocol package drops a batch's last offset, so
// before this each such batch was fetched for ever: a real broker's
// compacted changelog stopped readTopic on Apache Kafka 4.4.0.)
func TestFollowReadsACompactedPartition(t *testing.T) {
	log := func() *compactedLog {
		return &compactedLog{segments: [][]compactedBatch{
			{{0, 3, []int64{0, 1, 2, 3}}, {4, 1003, []int64{4}}},
			{{1004, 1006, []int64{1004, 1005, 1006}}, {1007, 1009, nil}},
			{{1010, 1012, []int64{1012}}, {1013, 5012, []int64{1013, 2000}}},
			{{5013, 5013, []int64{5013}}},
		}}
	}
	want := []int64{0, 1, 2, 3, 4, 1004, 1005, 1006, 1012, 1013, 2000, 5013}
	for _, c := range []struct {
		from, end int64
		want      []int64
	}{{0, 5014, want}, {500, 5014, want[5:]}, {0, 3000, want[:11]}, {2001, 5014, want[11:]}} {
		t.Run(fmt.Sprintf("from=%d/end=%d", c.from, c.end), func(t *testing.T) {
			l := log()
			var got []int64
			err := Follow(context.Background(), l, nil, FollowConfig{Topic: "t", Partition: 0, From: c.from, End: c.end}, func(batch []kafka.Message, _ int64) error {
				for _, m := range batch {
					got = append(got, m.Offset)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("read %v, want %v", got, c.want)
			}
			if l.fetches > 60 {
				t.Fatalf("%d fetches: a fetch per removed offset", l.fetches)
			}
			t.Logf("%d fetches", l.fetches)
		})
	}
}
