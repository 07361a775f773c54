package topics

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"time"
)

// AppendJSON appends ev encoded as docs/spec/DESIGN.md §2 JSON: an input event
// (features or x, id, label when not 0, ts when set) or a label record (id
// and label), its fields in name order as encoding/json writes a map.
// Floats are written in the shortest form that reads back to the same bits,
// features in name order, ts in RFC 3339 with nanoseconds: Decode reads it
// back to ev (TestEventRoundTrip). A non-finite value, which the contract
// refuses, is written as null.
func (ev Event) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	if ev.Kind == Input && ev.Features != nil {
		b = append(b, `"features":{`...)
		names := make([]string, 0, len(ev.Features))
		for name := range ev.Features {
			names = append(names, name)
		}
		sort.Strings(names)
		for i, name := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, name)
			b = append(b, ':')
			b = appendNumber(b, ev.Features[name])
		}
		b = append(b, "},"...)
	}
	b = append(b, `"id":`...)
	b = appendString(b, ev.ID)
	if ev.Label != 0 {
		b = append(b, `,"label":`...)
		b = strconv.AppendInt(b, int64(ev.Label), 10)
	}
	if ev.Kind == LabelRecord {
		return append(b, '}')
	}
	if !ev.TS.IsZero() {
		b = append(b, `,"ts":`...)
		b = appendString(b, ev.TS.Format(time.RFC3339Nano))
	}
	if ev.Features == nil {
		b = append(b, `,"x":[`...)
		for i, v := range ev.X {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendNumber(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendNumber is appendFloat, with null for a non-finite value.
func appendNumber(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	return appendFloat(b, f)
}

// appendString quotes s as encoding/json does: plain printable ASCII is
// copied; anything it would escape (quotes, backslashes, control
// characters, <, >, &, non-ASCII) goes through encoding/json itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat formats a finite f as encoding/json does: the shortest
// representation, in exponent form below 1e-6 and from 1e21 on, with the
// exponent's leading zero dropped.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
