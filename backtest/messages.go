package backtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
)

// Message is one record of a history: an event or a label record, with the
// entity key Kafka partitions it by.
type Message struct {
	// Labels is set on a delayed label record bound for a separate labels
	// topic when there is one (it goes to the events topic otherwise).
	Labels     bool
	Key, Value []byte
	// Event is the message's event, set instead of Value by an in-memory
	// pass (MessageOptions.InMemory).
	Event *topics.Event
	// Time is the message's record timestamp when MessageOptions.Clock is
	// set (zero otherwise).
	Time time.Time
}

// MessageOptions says how examples become messages.
type MessageOptions struct {
	// Keys spreads examples without a key over this many entities
	// ("entity-<n mod Keys>"); at least 1.
	Keys int
	// LabelsDelay holds each label back by this many events, as a label
	// record sent after them; 0 sends labels inline.
	LabelsDelay int
	// Partitioner names the hash that deals keys over a topic's partitions
	// (topics.Partitioners); "" is topics.DefaultPartitioner, cmd/producer's.
	Partitioner string
	// InMemory keeps each message's event as it is (Message.Event) instead
	// of encoding it: for a pass whose records never leave the process,
	// which the pipeline then takes without decoding (pipeline.Record's
	// Decoded).
	InMemory bool
	// Clock, when set, stamps every message with a record timestamp such
	// that merging an events topic and a separate labels topic by
	// timestamp — the smaller first, a tie to the events topic, each topic
	// in its own order: pipeline.Merge, the service's rule with
	// DRIFTSTREAM_LABELS_TOPIC — gives back the order in which Messages
	// emitted them. The first event is stamped Clock; a label record takes
	// the time of the event before it (Clock before any); the clock moves
	// on 1 ms before each event that follows a label record. Events with
	// no label record between them share a millisecond.
	Clock time.Time
}

// stamper is Messages' clock (MessageOptions.Clock).
type stamper struct {
	now     time.Time
	labeled bool // a label record was stamped since the clock last moved
}

// stamp sets m's Time, when there is a clock.
func (s *stamper) stamp(m *Message) {
	if s.now.IsZero() {
		return
	}
	if m.Labels {
		s.labeled = true
	} else if s.labeled {
		s.now, s.labeled = s.now.Add(time.Millisecond), false
	}
	m.Time = s.now
}

// message is the message of ev under key, encoded unless in memory.
func (o MessageOptions) message(labels bool, key []byte, ev topics.Event) Message {
	if o.InMemory {
		return Message{Labels: labels, Key: key, Event: &ev}
	}
	return Message{Labels: labels, Key: key, Value: ev.AppendJSON(nil)}
}

// Messages reads src to its end and calls emit for every message, in the
// one order that the producer writes and the backtest replays: each event,
// then the label records that fall due at it. Label records of the source
// (a JSONL file's) pass through where they stand, under their event's key.
// It returns the number of events.
func Messages(ctx context.Context, src streams.Source, opts MessageOptions, emit func(Message) error) (int, error) {
	if opts.Keys < 1 || opts.LabelsDelay < 0 {
		return 0, fmt.Errorf("keys %d and labels delay %d: need ≥ 1 and ≥ 0", opts.Keys, opts.LabelsDelay)
	}
	type late struct {
		due   int
		key   []byte
		label topics.Event
	}
	var lates []late
	keyOf := map[string]string{} // spread events' keys, for their label records
	clock := stamper{now: opts.Clock}
	send := func(labels bool, key []byte, ev topics.Event) error { // every message goes out here, stamped
		m := opts.message(labels, key, ev)
		clock.stamp(&m)
		return emit(m)
	}
	n := 0
	for {
		ex, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, err
		}
		if ex.LabelRecord {
			key, ok := ex.Key, true
			if key == "" {
				if key, ok = keyOf[ex.ID]; !ok && opts.Keys == 1 {
					key, ok = "entity-0", true
				}
			}
			if !ok {
				continue // a label for an event never seen: no key to send it under
			}
			if err := send(true, []byte(key), labelOf(ex.ID, ex.Label)); err != nil {
				return n, err
			}
			continue
		}
		key := ex.Key
		if key == "" {
			key = fmt.Sprintf("entity-%d", n%opts.Keys)
			if opts.Keys > 1 && ex.Label == 0 {
				keyOf[ex.ID] = key
			}
		}
		if ex.ID == "" {
			ex.ID = fmt.Sprint(n)
		}
		inline := opts.LabelsDelay == 0
		if err := send(false, []byte(key), eventOf(ex, inline)); err != nil {
			return n, err
		}
		if !inline && ex.Label != 0 {
			lates = append(lates, late{due: n + opts.LabelsDelay, key: []byte(key), label: labelOf(ex.ID, ex.Label)})
		}
		for len(lates) > 0 && lates[0].due <= n {
			if err := send(true, lates[0].key, lates[0].label); err != nil {
				return n, err
			}
			lates = lates[1:]
		}
		n++
	}
	for _, l := range lates { // the stream ended: deliver the labels still held back
		if err := send(true, l.key, l.label); err != nil {
			return n, err
		}
	}
	return n, nil
}

// eventOf is an example as a docs/spec/DESIGN.md §2 event, without its label when the
// label is sent later. A dense example's values are shared, not copied
// (nothing downstream modifies an input).
func eventOf(ex streams.Example, withLabel bool) topics.Event {
	x, ok := ex.X.DenseValues()
	if !ok {
		x = ex.X.Dense()
	}
	ev := topics.Event{ID: ex.ID, X: x, TS: ex.Time}
	if withLabel {
		ev.Label = ex.Label
	}
	return ev
}

// labelOf is a label record.
func labelOf(id string, label int) topics.Event {
	return topics.Event{Kind: topics.LabelRecord, ID: id, Label: label}
}
