package pipeline

import (
	"errors"
	"fmt"
	"math"

	"github.com/driftstream/driftstream/drift"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/learners"
)

// Config configures every worker of a service: how its keys learn
// (keyed.Settings, embedded) and the bounds on what a partition reads,
// holds and writes.
type Config struct {
	keyed.Settings
	// MaxBytes bounds an input message's value (0: topics.DefaultMaxBytes;
	// the service sets the input topics' max.message.bytes).
	MaxBytes int
	// MaxKeyBytes bounds a key's checkpoint record; Validate refuses a
	// configuration whose learner and pending bounds could exceed it (a Kafka
	// changelog record must fit in one message). 0 means DefaultMaxKeyBytes;
	// negative means no limit (file and memory stores).
	MaxKeyBytes int64
	// MaxKeyMemory bounds one key's learner state in memory; 0 means
	// DefaultMaxKeyMemory.
	MaxKeyMemory int64
	// MaxAbsValue bounds the magnitude of every input value (0 means
	// DefaultMaxAbsValue): beyond it, one update can overflow a learner's
	// state (second-order learners square the inputs).
	MaxAbsValue float64
	// TopicNames name the input topics in dead-letter headers.
	TopicNames [2]string
	// MaxKeyLength bounds an input record's key (0: DefaultMaxKeyLength):
	// a longer one is dead-lettered (ReasonKeyTooLong) and gets no state.
	MaxKeyLength int
	// Outputs are the output topics' record limits; Validate refuses bounds
	// whose outputs could exceed them, and dead letters are cut to fit.
	Outputs OutputLimits
}

// WithDefaults returns c with each unset (zero) field given its default:
// the pipeline's one table of defaults. NewWorker applies it; the service
// and the backtests apply it to the configuration they keep.
func (c Config) WithDefaults() Config {
	c.Settings = c.Settings.WithDefaults()
	if c.MaxKeyBytes == 0 {
		c.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if c.MaxKeyMemory == 0 {
		c.MaxKeyMemory = DefaultMaxKeyMemory
	}
	if c.MaxAbsValue == 0 {
		c.MaxAbsValue = DefaultMaxAbsValue
	}
	if c.TopicNames[0] == "" {
		c.TopicNames = [2]string{"events", "labels"}
	}
	if c.MaxKeyLength == 0 {
		c.MaxKeyLength = DefaultMaxKeyLength
	}
	return c
}

// Validate checks the configuration as WithDefaults completes it, and
// changes nothing. It sizes the learner's state before building one, so
// that a configuration too large for memory or for one changelog message
// is refused with the figures instead of failing at run time (or
// allocating the state to find out).
func (c Config) Validate() error {
	d := c.WithDefaults()
	return d.check()
}

// check validates a configuration with its defaults.
func (c *Config) check() error {
	if c.MaxKeyMemory < 0 || !(c.MaxAbsValue > 0) || math.IsInf(c.MaxAbsValue, 0) {
		return fmt.Errorf("max key memory %d, max abs value %v: must be positive", c.MaxKeyMemory, c.MaxAbsValue)
	}
	if err := c.Settings.Validate(); err != nil {
		return err
	}
	if _, err := c.KeyRecordBytes(); err != nil {
		return err
	}
	return c.validateOutputs()
}

// KeyRecordBytes bounds one key's checkpoint record: the learner's largest
// snapshot, the pending bytes bound and framing. It fails with ErrTooLarge,
// naming the sizes and what to change, when that exceeds MaxKeyBytes or the
// learner's state exceeds MaxKeyMemory. Call it on a Config with its
// defaults (WithDefaults).
func (c *Config) KeyRecordBytes() (int64, error) {
	state, err := learners.StateBytes(c.Learner, c.Params, c.Vector.Dim)
	if err != nil {
		return 0, err
	}
	if state > c.MaxKeyMemory {
		return 0, fmt.Errorf("learner %s in dimension %d holds up to %s per key, over the per-key memory budget of %s: lower the dimension (or hash bits), use a diagonal or first-order learner or logreg of one step size (\"slow\": 0), or raise DRIFTSTREAM_MAX_KEY_MEMORY: %w",
			c.Learner, c.Vector.Dim, byteSize(state), byteSize(c.MaxKeyMemory), ErrTooLarge)
	}
	if c.Standardize {
		state += 16*int64(c.Vector.Dim) + 32 // mean and spread per coordinate
	}
	detectors := int64(0)
	for _, d := range c.Detectors {
		n, err := drift.MaxBytes(d.Detector, d.Params)
		if err != nil {
			return 0, err
		}
		detectors += int64(n) + 16 // its length, since-count and flags
	}
	total := state + int64(c.MaxPendingBytes) + keyOverhead + detectors
	if c.MaxKeyBytes > 0 && total > c.MaxKeyBytes {
		return 0, fmt.Errorf("a key record of learner %s in dimension %d can reach %s (state %s + pending queries %s), over DRIFTSTREAM_MAX_KEY_BYTES = %s, which must stay below the broker's message.max.bytes (1 MB by default): lower the dimension (or hash bits), use a diagonal learner (\"diagonal\": true), a first-order one or logreg of one step size (\"slow\": 0: two thirds of its state), lower DRIFTSTREAM_MAX_PENDING_BYTES, or raise both limits together: %w",
			c.Learner, c.Vector.Dim, byteSize(total), byteSize(state), byteSize(int64(c.MaxPendingBytes)), byteSize(c.MaxKeyBytes), ErrTooLarge)
	}
	return total, nil
}

// byteSize prints a size in bytes with a binary unit.
func byteSize(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit && exp < 5; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(b)/float64(div), "KMGTPE"[exp], b)
}

// Defaults of the bounds in Config.
const (
	// DefaultMaxKeyBytes leaves room under Kafka's default message.max.bytes
	// (1,048,588) for the record key and framing.
	DefaultMaxKeyBytes  = 900_000
	DefaultMaxKeyMemory = 256 << 20
	DefaultMaxAbsValue  = 1e12
	// MaxDeadLetterBytes bounds a dead letter's copy of the original record;
	// a longer one is cut and marked with a "truncated" header, so that a
	// dead letter of an oversized record still fits in a message.
	MaxDeadLetterBytes = 64 << 10
	// keyOverhead bounds a key record's framing, key and offsets besides the
	// learner snapshot, the pending entries and the drift detectors
	// (drift.MaxBytes each).
	keyOverhead = 1024
)

// ErrTooLarge reports a configuration whose per-key state cannot fit the
// configured limits.
var ErrTooLarge = errors.New("per-key state too large")
