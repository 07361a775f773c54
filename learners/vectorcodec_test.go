package learners

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/driftstream/driftstream/internal/wire"
)

// The vector codec's layout, byte for byte: key states in changelogs hold it.
func TestVectorCodecLayout(t *testing.T) {
	sparse, _ := NewSparse(300, []int32{2, 299}, []float64{1.5, -2})
	dense, _ := NewDense([]float64{0.25, math.Copysign(0, -1)})
	empty, _ := NewSparse(4, []int32{}, []float64{})
	f := func(v float64) []byte { return wire.AppendFloat64(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name string
		x    Vector
		want []byte
	}{
		{"sparse", sparse, cat([]byte{0xac, 0x02, 1, 2, 2}, f(1.5), []byte{0xab, 0x02}, f(-2))},
		{"dense", dense, cat([]byte{2, 0, 2}, f(0.25), f(math.Copysign(0, -1)))},
		{"empty sparse", empty, []byte{4, 1, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.x.MarshalBinary()
			if err != nil || !bytes.Equal(got, c.want) {
				t.Fatalf("encoded % x (%v), want % x", got, err, c.want)
			}
			var back Vector
			if err := back.UnmarshalBinary(got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, c.x) {
				t.Fatalf("decoded %+v, want %+v", back, c.x)
			}
			if math.Signbit(back.At(1)) != math.Signbit(c.x.At(1)) {
				t.Fatal("the sign of a zero was lost")
			}
		})
	}
}

// Bytes that are not a valid vector are refused with ErrVectorFormat,
// whatever is wrong with them, and never allocate beyond what they hold.
func TestVectorCodecRefuses(t *testing.T) {
	uv := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	f := func(v float64) []byte { return wire.AppendFloat64(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	good := cat([]byte{10, 1, 2, 3}, f(1), []byte{7}, f(2))
	cases := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"sparse flag 2", cat([]byte{3, 2, 0})},
		{"more entries than the dimension", cat([]byte{1, 1, 2, 0}, f(1), []byte{0}, f(1))},
		{"dense with fewer entries than its dimension", cat([]byte{2, 0, 1}, f(1))},
		{"entries the bytes cannot hold", cat(uv(1<<30), []byte{0}, uv(1<<30), f(1))},
		{"index out of range", cat([]byte{3, 1, 1, 3}, f(1))},
		{"index beyond int32", cat([]byte{3, 1, 1}, uv(1<<32+1), f(1))},
		{"indices not increasing", cat([]byte{9, 1, 2, 4}, f(1), []byte{4}, f(1))},
		{"NaN", cat([]byte{1, 0, 1}, f(math.NaN()))},
		{"+Inf", cat([]byte{2, 1, 1, 1}, f(math.Inf(1)))},
		{"trailing byte", append(append([]byte(nil), good...), 0)},
	}
	for cut := range len(good) {
		cases = append(cases, struct {
			name string
			b    []byte
		}{"truncated", good[:cut]})
	}
	var x Vector
	if err := x.UnmarshalBinary(good); err != nil || x.Dim() != 10 || x.NNZ() != 2 {
		t.Fatalf("the valid encoding: %v, %+v", err, x)
	}
	for _, c := range cases {
		var v Vector
		if err := v.UnmarshalBinary(c.b); !errors.Is(err, ErrVectorFormat) {
			t.Errorf("%s (% x): %v, want ErrVectorFormat", c.name, c.b, err)
		}
	}
}

// Whatever the bytes, decoding does not panic, and a vector it accepts
// encodes to bytes that decode to the same vector.
func FuzzVectorCodec(f *testing.F) {
	sparse, _ := NewSparse(300, []int32{2, 299}, []float64{1.5, -2})
	dense, _ := NewDense([]float64{0.25, 3})
	for _, x := range []Vector{sparse, dense} {
		b, _ := x.MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var x Vector
		if err := x.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrVectorFormat) {
				t.Fatalf("refused without ErrVectorFormat: %v", err)
			}
			return
		}
		again, _ := x.MarshalBinary()
		var y Vector
		if err := y.UnmarshalBinary(again); err != nil || !reflect.DeepEqual(x, y) {
			t.Fatalf("re-encoded % x decodes to %+v (%v), want %+v", again, y, err, x)
		}
	})
}
