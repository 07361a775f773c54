package pipeline

import (
	"time"

	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/topics"
)

// Input topics, as indexes into applied-through offsets (keyed's).
const (
	EventsTopic = keyed.EventsTopic
	LabelsTopic = keyed.LabelsTopic
)

// Record is one input record.
type Record struct {
	Topic     int // EventsTopic or LabelsTopic
	Partition int
	Offset    int64
	Key       []byte
	Value     []byte
	// Time is the record's timestamp in its log (zero when unknown): the
	// order in which a partition's two input topics are merged (Merge).
	Time time.Time
	// Decoded, when set, is the record's event already decoded: a record
	// made in memory from an example (a backtest's pass), which skips the
	// JSON round trip (the contract's encoding reads back exactly:
	// contract's TestEventRoundTrip). Value is then unused; the event is
	// validated (topics.Event.Validate: what Decode enforces) and then
	// checked as a decoded one is.
	Decoded *topics.Event
	// Trace is the record's W3C trace context (its traceparent and
	// tracestate headers, when it has them), passed on to every output the
	// record makes, so that a trace follows an event through the service.
	Trace Trace
}

// Trace is a W3C trace context, as Kafka record headers carry it.
type Trace struct {
	Parent, State string
}

// The trace context's record headers.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// set adds the trace context's headers to h, making it when nil.
func (t Trace) set(h map[string]string) map[string]string {
	if t.Parent == "" && t.State == "" {
		return h
	}
	if h == nil {
		h = make(map[string]string, 2)
	}
	if t.Parent != "" {
		h[HeaderTraceParent] = t.Parent
	}
	if t.State != "" {
		h[HeaderTraceState] = t.State
	}
	return h
}

// Output kinds.
const (
	OutPrediction = "prediction"
	OutQuery      = "label-query"
	OutDeadLetter = "dead-letter"
	OutAlert      = "drift-alert" // the alerts topic
)

// Output is one message for an output topic.
type Output struct {
	Kind  string
	Key   []byte
	Value []byte
	// Headers are set on dead letters (DeadLetter.Output), and on every
	// output of a record with a trace context (Record.Trace).
	Headers map[string]string
	// Source is the input record the output came from: the original of a
	// dead letter that replaces an output the broker refuses.
	Source Position
}

// Position locates an input record.
type Position struct {
	Topic, Partition int // Topic: EventsTopic or LabelsTopic
	Offset           int64
}

// OutputKinds are every output kind.
var OutputKinds = []string{OutPrediction, OutQuery, OutDeadLetter, OutAlert}
