package pipeline

import "time"

// Hook is anything that wants to hear of a Runner's events (the service's
// metrics, a backtest's scorer): a value implementing any of RestoredHook,
// RecordHook, CheckpointedHook and RetryingHook, whose methods the Runner
// calls; the rest it is not told of. Counters need no hook: Runner.Snapshot
// reads them at any time.
type Hook any

// RestoredHook hears once per Run that the partition was restored or
// resumed, from the partition's goroutine.
type RestoredHook interface {
	Restored(res Restored, keys KeyCount, took time.Duration)
}

// RecordHook hears of every record processed, from the partition's
// goroutine, with what it did to the counters.
type RecordHook interface {
	Record(f *Fetched, e Effect)
}

// CheckpointedHook hears of every checkpoint committed, from the
// partition's write-behind goroutine.
type CheckpointedHook interface {
	Checkpointed(records, bytes int, keys KeyCount, took time.Duration)
}

// RetryingHook hears of every retriable error about to be retried, from
// the partition's goroutine or its write-behind's.
type RetryingHook interface {
	Retrying(step Step, err error, attempt int, wait time.Duration)
}

// hooks are a Runner's hooks, sorted by the events they hear of.
type hooks struct {
	restored     []RestoredHook
	record       []RecordHook
	checkpointed []CheckpointedHook
	retrying     []RetryingHook
}

func sortHooks(hs []Hook) hooks {
	var h hooks
	for _, x := range hs {
		if x, ok := x.(RestoredHook); ok {
			h.restored = append(h.restored, x)
		}
		if x, ok := x.(RecordHook); ok {
			h.record = append(h.record, x)
		}
		if x, ok := x.(CheckpointedHook); ok {
			h.checkpointed = append(h.checkpointed, x)
		}
		if x, ok := x.(RetryingHook); ok {
			h.retrying = append(h.retrying, x)
		}
	}
	return h
}
