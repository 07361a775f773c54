package checkpoint

import (
	"fmt"
	"testing"
)

// BenchmarkEncodeKey encodes one key record, as every checkpoint does for
// each key it writes: a perceptron d=10 state (about 200 bytes) and a
// lasec-ss d=50 one (about 11 KB).
func BenchmarkEncodeKey(b *testing.B) {
	for _, size := range []int{200, 11_000} {
		rec := KeyRecord{Partition: 3, Key: "customer-0001234", Epoch: NextEpoch(0, 7), AppliedThrough: [2]int64{123456, NoOffset}, State: make([]byte, size)}
		b.Run(fmt.Sprintf("state-%dB", size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				EncodeKey(rec)
			}
		})
	}
}
