// Package pipeline is driftstream's processing core (DESIGN.md §1): a Worker
// owns one input partition and every key on it, turns records into
// predictions, label queries and dead letters, learns from labels (inline or
// delayed), and checkpoints the keys it changed. It knows nothing of Kafka:
// the service, the backtest and the embedded demo feed it records and drain
// its outputs.
//
// One concept per file:
//
//   - records.go: the input records and outputs a Worker takes and makes.
//   - config.go: Config, its validation and the key-record size bound.
//   - worker.go: the Worker and its Process step (predict, query, score, learn).
//   - keystate.go: a key's state in memory; keycodec.go: its versioned binary
//     format in the changelog; keycache.go: keys beyond memory (key store).
//   - labelwait.go: events awaiting their label, early labels, the join.
//   - population.go: the population model and each key's mixture.
//   - alerts.go: drift detectors per key and their alerts.
//   - deadletter.go: dead letters and output size limits (the outputs' JSON
//     is package topics's).
//   - checkpoint.go: taking a checkpoint; restore.go: restoring from one.
//   - runner.go: the partition loop (Runner); phase.go: where a Runner is in
//     its life, one value (Phase); ports.go: what it reads from and writes
//     to (Source, Sink, Committer); hooks.go: who hears of its events;
//     counters.go: the counters and the snapshot it publishes; errors.go and
//     retry.go: its failures, steps and backoff; writebehind.go: its writes
//     off the loop.
//   - resume.go, catchup.go, park.go: reusing a partition's state without a
//     full restore (kept in memory, caught up from the log's tail, parked on
//     disk for the next process).
//   - inspect.go: the key API's view of a key.
package pipeline
