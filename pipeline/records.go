package pipeline

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
