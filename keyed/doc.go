// Package keyed is driftstream's per-key learning: what one record does to
// the state of its key. A Model holds what a partition's keys share (the
// learner's parameters, the drift detectors' configuration, the population
// model through its holder); a State is one key's (its learner, the events
// awaiting their labels, its drift watch, its counters). Model.Step turns
// one decoded record and its key's State into one Step: the prediction, the
// label request and the drift alerts to write, the prediction it scored,
// and whether the key refused the record.
//
// The package knows nothing of Kafka, offsets' commits or checkpoints'
// timing: package pipeline looks keys up, applies Steps, and checkpoints,
// restores and fences the States (State.MarshalBinary, Model.Decode).
//
// One concept per file:
//
//   - settings.go: Settings, their defaults and validation.
//   - model.go: the Model, its holder of shared state (Shared), a guarded
//     learning step.
//   - step.go: Step, the query rule (one place), scoring and learning of an
//     event with its label.
//   - labelwait.go: events awaiting their label, early labels, a delayed
//     label's scoring and learning.
//   - sourced.go: awaited inputs the events topic gives back, which the
//     changelog records leave out: their offsets, and taking them back.
//   - state.go: a key's State in memory; codec.go: its versioned binary
//     format in the changelog.
//   - population.go, additive.go: the population models.
//   - watch.go: drift detectors per key and their alerts.
//   - info.go: a key's counters and the key API's view of it.
//   - totals.go: a partition's counters.
//
// The words used here and in docs/ARCHITECTURE.md's glossary: an event is
// an input record (with its label or not); a label record carries the
// label of an earlier event; a label request (a query) is the output that
// asks for an unlabeled event's label; a pending event is an unlabeled
// event awaiting its label (asked for or not); an early label is a
// labels-topic label whose event has not come yet.
package keyed
