package wire

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

var errTest = errors.New("test layout")

// What the Append functions and encoding/binary write, a Reader reads back
// exactly; every truncation fails with the sentinel, and once failed, every
// later read is zero.
func TestReaderReadsWhatWasAppended(t *testing.T) {
	var b []byte
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -7)
	b = AppendFloat64(b, math.Copysign(0, -1))
	b = AppendFloat64(b, math.Inf(1))
	b = append(b, 0xfe)
	b = AppendBytes(b, []byte("key"))
	b = AppendBytes(b, nil)
	b = AppendBytes(b, []byte{1, 2})

	r := NewReader(b, errTest)
	u, v, z, inf, by, s, empty, view := r.Uvarint(), r.Varint(), r.Float64(), r.Float64(), r.Byte(), r.Bytes(), r.Bytes(), r.View()
	if err := r.Done(); err != nil {
		t.Fatal(err)
	}
	if u != 300 || v != -7 || !math.Signbit(z) || z != 0 || !math.IsInf(inf, 1) || by != 0xfe || string(s) != "key" || len(empty) != 0 || string(view) != "\x01\x02" {
		t.Fatalf("read back %d %d %v %v %x %q %q %v", u, v, z, inf, by, s, empty, view)
	}

	reads := []struct {
		name string
		read func(*Reader)
	}{
		{"uvarint", func(r *Reader) { r.Uvarint() }},
		{"varint", func(r *Reader) { r.Varint() }},
		{"float", func(r *Reader) { r.Float64() }},
		{"byte", func(r *Reader) { r.Byte() }},
		{"bytes", func(r *Reader) { r.Bytes() }},
		{"view", func(r *Reader) { r.View() }},
	}
	for cut := 0; cut < len(b); cut++ {
		r := NewReader(b[:cut], errTest)
		r.Uvarint()
		r.Varint()
		r.Float64()
		r.Float64()
		r.Byte()
		r.Bytes()
		r.Bytes()
		r.View()
		if err := r.Done(); !errors.Is(err, errTest) {
			t.Fatalf("cut at %d of %d: %v, want the sentinel", cut, len(b), err)
		}
		for _, c := range reads { // sticky: a read after a failure reads nothing
			left := len(r.B)
			c.read(r)
			if len(r.B) != left {
				t.Fatalf("cut at %d: %s after a failure consumed %d bytes", cut, c.name, left-len(r.B))
			}
		}
	}
	if err := NewReader(append(b, 0), errTest).Done(); !errors.Is(err, errTest) {
		t.Fatalf("trailing bytes: %v", err)
	}
}
