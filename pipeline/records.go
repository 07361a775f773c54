package pipeline

import "github.com/driftstream/driftstream/contract"

// Input topics, as indexes into applied-through offsets.
const (
	EventsTopic = 0
	LabelsTopic = 1
)

// Record is one input record.
type Record struct {
	Topic     int // EventsTopic or LabelsTopic
	Partition int
	Offset    int64
	Key       []byte
	Value     []byte
	// Decoded, when set, is the record's event already decoded: a record
	// made in memory from an example (a backtest's pass), which skips the
	// JSON round trip (the contract's encoding reads back exactly:
	// contract's TestEventRoundTrip). Value is then unused; the event is
	// validated (contract.Event.Validate: what Decode enforces) and then
	// checked as a decoded one is.
	Decoded *contract.Event
}

// Output kinds.
const (
	OutPrediction = "prediction"
	OutQuery      = "label-query"
	OutDeadLetter = "dead-letter"
)

// Output is one message for an output topic.
type Output struct {
	Kind  string
	Key   []byte
	Value []byte
	// Headers are set on dead letters (DeadLetter.Output).
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
