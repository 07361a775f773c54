// Package pipeline is driftstream's exactly-once machinery (docs/spec/DESIGN.md §1,
// docs/ARCHITECTURE.md): a Worker owns one input partition and every key
// on it. Per record it decodes, looks the key up, has the partition's
// keyed.Model step the key (package keyed: predictions, label requests,
// scoring, learning, drift alerts) and writes the Step's outputs; it
// checkpoints the keys it changed, restores and fences them, and knows
// nothing of learners or detectors. It knows nothing of Kafka either: the
// service, the backtest and the embedded demo feed it records and drain
// its outputs.
//
// One concept per file:
//
//   - records.go: the input records and outputs a Worker takes and makes.
//   - config.go: Config (keyed.Settings and the partition's bounds), its
//     validation and the key-record size bound.
//   - worker.go: the Worker and its Process step (decode, look up, step,
//     apply); inspect.go: the key API's view of a key and its reset.
//   - keycache.go: keys beyond memory (key store).
//   - deadletter.go: dead letters and output size limits (the outputs' JSON
//     is package topics's).
//   - checkpoint.go: taking a checkpoint; restore.go: restoring from one;
//     reread.go: re-reading the events topic for the awaited inputs the
//     checkpoint left out.
//   - runner.go: the partition loop (Runner); phase.go: where a Runner is in
//     its life, one value (Phase); ports.go: what it reads from and writes
//     to (Source, Sink, Committer); hooks.go: who hears of its events;
//     counters.go: the snapshot it publishes; errors.go and retry.go: its
//     failures, steps and backoff; writebehind.go: its writes off the loop.
//   - resume.go, catchup.go, park.go: reusing a partition's state without a
//     full restore (kept in memory, caught up from the log's tail, parked on
//     disk for the next process).
package pipeline
