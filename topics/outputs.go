package topics

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// KeyB64 is the key_b64 field of the outputs of a record whose key is
// not valid UTF-8: the key's bytes in standard base64, so that no two keys
// read alike ("key" is a JSON string, which replaces each invalid byte
// with U+FFFD). It is "" (the field absent) for a valid UTF-8 key.
func KeyB64(key string) string {
	if utf8.ValidString(key) {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(key))
}

// The output records of docs/spec/DESIGN.md §2, as the service writes them to the
// predictions, label-queries and alerts topics (dead letters are the input
// record itself, with headers). Each type's JSON tags are the contract: a
// consumer decodes a record with encoding/json into the type; the service
// encodes the first two without reflection, byte for byte as encoding/json
// does (TestOutputEncodingMatchesJSON).

// Prediction is the output of every event: the label the key's model made.
type Prediction struct {
	ID  string `json:"id"`
	Key string `json:"key"`
	// KeyB64 is the record key in base64 when it is not valid UTF-8
	// (KeyB64), else absent.
	KeyB64    string  `json:"key_b64,omitempty"`
	Label     int     `json:"label"`
	Score     float64 `json:"score"`
	Learner   string  `json:"learner"`
	Partition int     `json:"partition"`
	Offset    int64   `json:"offset"`
	// QueryProb is the probability with which a sampler asked for this
	// event's label; absent for learners that are not samplers.
	QueryProb *float64 `json:"query_prob,omitempty"`
	// Posterior is the probability that the label is +1, from learners
	// that estimate one (logreg); absent for margin learners, whose score
	// is not a probability.
	Posterior *float64 `json:"posterior,omitempty"`
}

// LabelQuery asks for the label of an unlabeled event.
type LabelQuery struct {
	ID        string  `json:"id"`
	Key       string  `json:"key"`
	KeyB64    string  `json:"key_b64,omitempty"`
	Score     float64 `json:"score"`
	QueryProb float64 `json:"query_prob"`
	Partition int     `json:"partition"`
	Offset    int64   `json:"offset"`
}

// The kinds of drift alert record.
const (
	// AlertOpened opens a key's incident: a detector confirmed a drift and
	// its signal rose by at least the minimum rise.
	AlertOpened = "alert"
	// AlertResolved closes it (written only when the service is asked to:
	// DRIFTSTREAM_ALERT_RESOLVED).
	AlertResolved = "resolved"
)

// DriftAlert is a key's drift incident opening (Kind AlertOpened: a
// detector confirmed a drift, and its signal rose) or closing (Kind
// AlertResolved), with the rise measured and the action taken.
type DriftAlert struct {
	Kind      string  `json:"kind"`
	Key       string  `json:"key"`
	KeyB64    string  `json:"key_b64,omitempty"`
	Partition int     `json:"partition"`
	Offset    int64   `json:"offset"`
	ID        string  `json:"id"`
	TS        *string `json:"ts"` // null when the event had none
	// Detector and Signal are the detector that opened the incident and
	// the signal it watches.
	Detector string `json:"detector"`
	Signal   string `json:"signal"`
	// Recent and Reference are the signal's means over its recent window
	// (its last RecentN values: events, or labeled events for mistakes) and
	// over its reference window (the ReferenceN values before those), at
	// this record; Recent − Reference is the rise, at least MinRise when
	// the incident opened. On a resolved record, Reference is the level
	// the incident opened with.
	Recent     float64 `json:"rate_recent"`
	Reference  float64 `json:"rate_reference"`
	RecentN    int     `json:"window_recent"`
	ReferenceN int     `json:"window_reference"`
	MinRise    float64 `json:"min_rise"`
	// MistakeRateBefore and After are the key's mistake rates over its
	// reference and recent windows of labeled events (for the mistakes
	// signal, Reference and Recent themselves); null when a window is
	// empty.
	MistakeRateBefore *float64 `json:"mistake_rate_before"`
	MistakeRateAfter  *float64 `json:"mistake_rate_after"`
	// Detections counts the detections of the incident: 1 when it opens,
	// with those it absorbed when it is resolved.
	Detections int64 `json:"detections"`
	// OpenedOffset is the offset of the alert that opened the incident
	// (resolved records only).
	OpenedOffset         *int64 `json:"opened_offset,omitempty"`
	EventsSinceLastAlert int64  `json:"events_since_last_alert"`
	Action               string `json:"action"`
}

// AppendJSON appends the prediction's JSON encoding to b.
func (m Prediction) AppendJSON(b []byte) []byte {
	b = appendHead(b, m.ID, m.Key, m.KeyB64)
	b = append(b, `,"label":`...)
	b = strconv.AppendInt(b, int64(m.Label), 10)
	b = append(b, `,"score":`...)
	b = appendFloat(b, m.Score)
	b = append(b, `,"learner":`...)
	b = appendString(b, m.Learner)
	b = appendPosition(b, m.Partition, m.Offset)
	b = appendOptional(b, `,"query_prob":`, m.QueryProb)
	b = appendOptional(b, `,"posterior":`, m.Posterior)
	return append(b, '}')
}

// AppendJSON appends the label query's JSON encoding to b.
func (m LabelQuery) AppendJSON(b []byte) []byte {
	b = appendHead(b, m.ID, m.Key, m.KeyB64)
	b = append(b, `,"score":`...)
	b = appendFloat(b, m.Score)
	b = append(b, `,"query_prob":`...)
	b = appendFloat(b, m.QueryProb)
	b = appendPosition(b, m.Partition, m.Offset)
	return append(b, '}')
}

// appendHead opens an output's JSON object with its "id", "key" and, for a
// key that is not UTF-8, "key_b64".
func appendHead(b []byte, id, key, keyB64 string) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, id)
	b = append(b, `,"key":`...)
	b = appendString(b, key)
	if keyB64 != "" {
		b = append(b, `,"key_b64":`...)
		b = appendString(b, keyB64)
	}
	return b
}

// appendPosition appends an output's input "partition" and "offset".
func appendPosition(b []byte, partition int, offset int64) []byte {
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, `,"offset":`...)
	return strconv.AppendInt(b, offset, 10)
}

// appendOptional appends field (`,"name":`) and *v, or nothing when v is nil.
func appendOptional(b []byte, field string, v *float64) []byte {
	if v == nil {
		return b
	}
	return appendFloat(append(b, field...), *v)
}

// AppendJSON appends the alert's JSON encoding to b (alerts are rare:
// encoding/json encodes them).
func (m DriftAlert) AppendJSON(b []byte) []byte {
	j, _ := json.Marshal(m) // strings and numbers: cannot fail
	return append(b, j...)
}
