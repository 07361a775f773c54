package pipeline

import (
	"encoding/json"
	"math"
	"strconv"
)

// The two outputs of every event are encoded without reflection, byte for
// byte as encoding/json encodes them (TestOutputEncodingMatchesJSON).

// jsonAppender is an output that appends its own JSON encoding.
type jsonAppender interface{ appendJSON([]byte) []byte }

func (m predictionMsg) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, m.ID)
	b = append(b, `,"key":`...)
	b = appendString(b, m.Key)
	b = append(b, `,"label":`...)
	b = strconv.AppendInt(b, int64(m.Label), 10)
	b = append(b, `,"score":`...)
	b = appendFloat(b, m.Score)
	b = append(b, `,"learner":`...)
	b = appendString(b, m.Learner)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(m.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, m.Offset, 10)
	if m.QueryProb != nil {
		b = append(b, `,"query_prob":`...)
		b = appendFloat(b, *m.QueryProb)
	}
	return append(b, '}')
}

func (m queryMsg) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, m.ID)
	b = append(b, `,"key":`...)
	b = appendString(b, m.Key)
	b = append(b, `,"score":`...)
	b = appendFloat(b, m.Score)
	b = append(b, `,"query_prob":`...)
	b = appendFloat(b, m.QueryProb)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(m.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, m.Offset, 10)
	return append(b, '}')
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
