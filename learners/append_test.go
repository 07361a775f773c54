package learners

import (
	"encoding"
	"testing"
)

// AppendSnapshot appends every learner's snapshot, the bytes MarshalBinary
// returns, after what the buffer held — in place for the learners that
// append their own (encoding.BinaryAppender), by a copy for the others.
func TestAppendSnapshotIsMarshalBinary(t *testing.T) {
	appenders := 0
	for _, c := range allCases() {
		t.Run(c.String(), func(t *testing.T) {
			l := c.build(t, 1, "k")
			play(t, l, c.stream(5, 300))
			if _, ok := l.(encoding.BinaryAppender); ok {
				appenders++
			}
			prefix := []byte("the records before")
			got, err := AppendSnapshot(append(make([]byte, 0, 4), prefix...), l)
			if err != nil {
				t.Fatal(err)
			}
			if want := snapshot(t, l); string(got) != string(prefix)+string(want) {
				t.Fatalf("appended %x, want %x after the prefix", got, want)
			}
		})
	}
	if appenders == 0 {
		t.Fatal("no learner appends its own snapshot: the in-place path is untested")
	}
}
