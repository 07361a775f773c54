package wire

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// AppendSized writes what AppendBytes writes, whatever the size of what is
// appended (lengths of one, two and three varint bytes) and whatever b
// held before; on error b is as it was.
func TestAppendSizedIsAppendBytes(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 300, 16383, 16384, 70000} {
		for _, prefix := range [][]byte{nil, []byte("head"), make([]byte, 0, n+16)} {
			t.Run(fmt.Sprintf("n=%d/prefix=%d/cap=%d", n, len(prefix), cap(prefix)), func(t *testing.T) {
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(i*7 + 3)
				}
				want := AppendBytes(append([]byte(nil), prefix...), p)
				got, err := AppendSized(append(prefix[:0:0], prefix...), func(b []byte) ([]byte, error) { return append(b, p...), nil })
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("AppendSized: %v, %d bytes; AppendBytes %d bytes", err, len(got), len(want))
				}
			})
		}
	}
	boom := errors.New("boom")
	got, err := AppendSized([]byte("head"), func(b []byte) ([]byte, error) { return append(b, "half"...), boom })
	if !errors.Is(err, boom) || string(got) != "head" {
		t.Fatalf("on error: %q, %v", got, err)
	}
}
