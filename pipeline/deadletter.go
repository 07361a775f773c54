package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/topics"
)

// Record sizes, as a Kafka broker measures them against max.message.bytes
// (the limit applies to a whole v2 record batch on the wire).
const (
	// BatchOverhead and RecordOverhead are checkpoint's: a batch's header,
	// and one record's framing besides its key, value and headers.
	BatchOverhead  = checkpoint.BatchOverhead
	RecordOverhead = checkpoint.RecordOverhead
	// HeaderOverhead bounds one header's framing besides its key and value
	// (two varint lengths).
	HeaderOverhead = 10
	// DefaultMaxMessageBytes is Kafka's default message.max.bytes, the limit
	// assumed for an output topic whose own limit is not known.
	DefaultMaxMessageBytes = 1_048_588
	// DefaultMaxKeyLength bounds an input record's key (Config.MaxKeyLength).
	DefaultMaxKeyLength = 4 << 10
	// MaxErrorHeaderBytes bounds a dead letter's "error" header: the errors
	// quote offending tokens in excerpts (topics.Excerpt), and a longer
	// message is cut here too.
	MaxErrorHeaderBytes = 1 << 10
	// deadLetterHeadroom bounds a dead letter's headers: the error, the
	// topic names (at most 249 bytes each in Kafka), the positions, sizes
	// and hashes, with their names and framing.
	deadLetterHeadroom = 4 << 10
	// outputHeadroom bounds everything in a prediction, label query or
	// alert besides the escaped key and id: field names, numbers, the
	// learner's, detector's and signal's names, the time.
	outputHeadroom = 1 << 10
)

// RecordBytes bounds the bytes of one record in a batch with a key and a
// value of these lengths and these headers.
func RecordBytes(keyLen, valueLen int, headers map[string]string) int {
	n := keyLen + valueLen + RecordOverhead
	for k, v := range headers {
		n += len(k) + len(v) + HeaderOverhead
	}
	return n
}

// OutputLimits are the largest record batch each output topic accepts: its
// max.message.bytes (or the broker's message.max.bytes). Zero means
// DefaultMaxMessageBytes. Every output the pipeline makes fits its limit
// as one record (Config.Validate proves it for the configured bounds).
type OutputLimits struct {
	Predictions, Queries, DeadLetters, Alerts int
}

// Of returns the limit for outputs of kind.
func (l OutputLimits) Of(kind string) int {
	var n int
	switch kind {
	case OutPrediction:
		n = l.Predictions
	case OutQuery:
		n = l.Queries
	case OutDeadLetter:
		n = l.DeadLetters
	case OutAlert:
		n = l.Alerts
	}
	if n <= 0 {
		return DefaultMaxMessageBytes
	}
	return n
}

// validateOutputs refuses limits that the configured outputs could exceed:
// a prediction, label query or alert of the longest key and id, escaped as
// JSON escapes them (six bytes a byte at worst), and a dead letter of the
// longest key with its headers and none of its value.
func (c *Config) validateOutputs() error {
	if c.MaxKeyLength < 0 {
		return fmt.Errorf("max key length %d: must be ≥ 0 (0: %d)", c.MaxKeyLength, DefaultMaxKeyLength)
	}
	escaped := 6*(c.MaxKeyLength+topics.MaxIDBytes) + 4
	need := map[string]int{
		OutPrediction: BatchOverhead + RecordBytes(c.MaxKeyLength, escaped+len(c.Learner)+outputHeadroom, nil),
		OutQuery:      BatchOverhead + RecordBytes(c.MaxKeyLength, escaped+outputHeadroom, nil),
		OutDeadLetter: BatchOverhead + RecordOverhead + c.MaxKeyLength + deadLetterHeadroom,
	}
	if len(c.Detectors) > 0 {
		need[OutAlert] = BatchOverhead + RecordBytes(c.MaxKeyLength, escaped+outputHeadroom, nil)
	}
	for _, kind := range []string{OutPrediction, OutQuery, OutDeadLetter, OutAlert} {
		if n, ok := need[kind]; ok && n > c.Outputs.Of(kind) {
			return fmt.Errorf("a %s output with a key of DRIFTSTREAM_MAX_KEY_LENGTH = %d bytes can take %d bytes, over its topic's limit of %d (max.message.bytes): lower the key length bound or raise the topic's limit: %w",
				kind, c.MaxKeyLength, n, c.Outputs.Of(kind), ErrTooLarge)
		}
	}
	return nil
}

// DeadLetter is a record the pipeline could not process, or an output the
// broker refused, on its way to the dead-letter topic.
type DeadLetter struct {
	// Reason is the class (a Reason constant), Err the explanation.
	Reason string
	Err    error
	// SourceTopic, Partition and Offset locate the input record, from
	// which the original can always be fetched again.
	SourceTopic string
	Partition   int
	Offset      int64
	// Key and Value are the original bytes (the input record's, or the
	// refused output's).
	Key, Value []byte
	// Extra headers, such as the refused output's kind and topic.
	Extra map[string]string
}

// Output is the dead letter as one record that fits in limit bytes (a
// batch of one): the original key and value when they fit beside the
// headers (the value at most MaxDeadLetterBytes), else cut, with headers
// giving the original sizes and SHA-256 hashes. The key is cut at maxKey
// bytes at most. Headers: error (at most MaxErrorHeaderBytes), reason,
// source-topic, partition, offset, the Extra ones, and when anything was
// cut truncated, original-key-bytes, original-key-sha256,
// original-value-bytes, original-value-sha256.
func (d DeadLetter) Output(limit, maxKey int) Output {
	h := map[string]string{"error": clip(d.Err.Error(), MaxErrorHeaderBytes), "reason": d.Reason, "source-topic": d.SourceTopic,
		"partition": strconv.Itoa(d.Partition), "offset": strconv.FormatInt(d.Offset, 10)}
	for k, v := range d.Extra {
		h[k] = v
	}
	key, value := d.Key, d.Value
	if len(key) > maxKey || len(value) > MaxDeadLetterBytes || BatchOverhead+RecordBytes(len(key), len(value), h) > limit {
		h["original-key-bytes"] = strconv.Itoa(len(d.Key))
		h["original-key-sha256"] = sha256Hex(d.Key)
		h["original-value-bytes"] = strconv.Itoa(len(d.Value))
		h["original-value-sha256"] = sha256Hex(d.Value)
		key = key[:min(len(key), maxKey)]
		truncated := func(valueLen int) string {
			return fmt.Sprintf("key: the first %d of %d bytes; value: the first %d of %d bytes", len(key), len(d.Key), valueLen, len(d.Value))
		}
		h["truncated"] = truncated(len(d.Value)) // as wide as it can be, to size the room
		room := limit - BatchOverhead - RecordBytes(len(key), 0, h)
		value = value[:max(0, min(len(value), MaxDeadLetterBytes, room))]
		h["truncated"] = truncated(len(value))
	}
	return Output{Kind: OutDeadLetter, Key: key, Value: value, Headers: h}
}

// clip cuts s to at most n bytes at a UTF-8 boundary, saying how long it was.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 32
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Dead-letter reasons, the values of the metric label and of the counters above.
const (
	ReasonMissingKey   = "missing_key"
	ReasonKeyTooLong   = "key_too_long"
	ReasonInvalidEvent = "invalid_event"
	ReasonRejected     = "rejected_by_learner"
	// ReasonOutputTooLarge and ReasonOutputInvalid are the dead letters that
	// replace an output the broker refused as too large, or as an invalid
	// or corrupt record (made by the service's sink, not by a worker).
	ReasonOutputTooLarge = "output_too_large"
	ReasonOutputInvalid  = "output_invalid"
)

// Reasons are every dead-letter reason.
var Reasons = []string{ReasonMissingKey, ReasonKeyTooLong, ReasonInvalidEvent, ReasonRejected, ReasonOutputTooLarge, ReasonOutputInvalid}
