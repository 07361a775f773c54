package checkpoint

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzDecode feeds arbitrary bodies, framed with a valid CRC so that the
// fuzzer gets past the checksum, and arbitrary raw bytes to Decode: it never
// panics, and whatever it accepts encodes back to a record that decodes to
// the same value.
func FuzzDecode(f *testing.F) {
	for _, seed := range [][]byte{
		EncodeKey(KeyRecord{Partition: 2, Key: "device-7", Epoch: NextEpoch(0, 3), AppliedThrough: [2]int64{41, NoOffset}, State: []byte{1, 2, 3}}),
		EncodeMarker(Marker{Partition: 1, Epoch: 5, Through: [2]int64{100, 7}}),
		EncodeOwnership(Ownership{Partition: 0, Epoch: NextEpoch(1<<32, 9), Owner: "host-1/pid-42"}),
		EncodeKey(KeyRecord{Key: "empty"}),
	} {
		f.Add(seed[1], seed[6:], false)
		f.Add(seed[1], seed, true)
	}
	f.Fuzz(func(t *testing.T, kind byte, body []byte, raw bool) {
		data := body
		if !raw {
			data = frame(append(header(nil, kind), body...), 0)
		}
		rec, err := Decode(data)
		if err != nil {
			return
		}
		var again []byte
		switch {
		case rec.Key != nil:
			again = EncodeKey(*rec.Key)
		case rec.Marker != nil:
			again = EncodeMarker(*rec.Marker)
		case rec.Owner != nil:
			again = EncodeOwnership(*rec.Owner)
		default:
			t.Fatalf("Decode accepted %x but set no record", data)
		}
		back, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(back), normalize(rec)) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", back, rec)
		}
	})
}

// normalize makes an empty state and a nil one compare equal.
func normalize(r Record) Record {
	if r.Key != nil {
		k := *r.Key
		if len(k.State) == 0 {
			k.State = nil
		} else {
			k.State = bytes.Clone(k.State)
		}
		r.Key = &k
	}
	return r
}
