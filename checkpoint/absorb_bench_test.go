package checkpoint

import (
	"fmt"
	"testing"
)

// BenchmarkAbsorb measures reading a changelog's records into a snapshot —
// decoding, checking and keeping the last record per key — the part of a
// restore that every store shares: 100k keys of 200-byte states, then a
// marker, each record a fresh buffer as a Kafka fetch hands it over.
//
//	go test -run '^$' -bench Absorb -benchmem ./checkpoint
func BenchmarkAbsorb(b *testing.B) {
	const nkeys = 100_000
	state := make([]byte, 200)
	var keys, values [][]byte
	var total int64
	for i := range nkeys {
		k := fmt.Sprintf("customer-%07d", i)
		v := EncodeKey(KeyRecord{Partition: 0, Key: k, Epoch: 1, AppliedThrough: [2]int64{int64(i), NoOffset}, State: state})
		keys, values = append(keys, []byte(k)), append(values, v)
		total += int64(len(k) + len(v))
	}
	mk := []byte(markerKey(1))
	mv := EncodeMarker(Marker{Partition: 0, Epoch: 1, Through: [2]int64{nkeys, NoOffset}})
	b.SetBytes(total)
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		fresh := make([][]byte, len(values)) // a fetch's buffers: the store may keep them
		for i, v := range values {
			fresh[i] = append([]byte(nil), v...)
		}
		b.StartTimer()
		snap := newSnapshot(nil)
		for i := range keys {
			snap.absorb(0, int64(i), keys[i], fresh[i], true)
		}
		snap.absorb(0, int64(len(keys)), mk, mv, true)
		if len(snap.Keys) != nkeys || snap.Marker == nil {
			b.Fatalf("%d keys, marker %v", len(snap.Keys), snap.Marker)
		}
	}
}
