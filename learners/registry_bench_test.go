package learners

import "testing"

// BenchmarkRegistry times the registry on the hot paths: Lookup at every
// worker start, New for every key restored or created.
//
//	go test -run '^$' -bench Registry -benchmem ./learners
func BenchmarkRegistry(b *testing.B) {
	b.Run("Lookup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Lookup("lasec-ss"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("New", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := New("perceptron", nil, Config{Dim: 10, Key: "k"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
