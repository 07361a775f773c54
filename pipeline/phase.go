package pipeline

// Phase is where a partition's Runner is in its life: one value, published
// with its Snapshot, that readiness, the partitions API and the key API
// read instead of inferring it from what has been counted. It only moves
// forward:
//
//	PhaseIdle ─Run─▶ PhaseRestoring ─▶ PhaseRunning ─ctx ends─▶ PhaseStopping ─▶ PhaseStopped
//	                       │                 │                        │
//	                       └─────────────────┴────────────────────────┴──▶ PhaseStopped or PhaseFailed
//
// A Runner stopped while restoring (revoked, shut down), one that lost its
// ownership, and one whose source ended all end in PhaseStopped; one whose
// Run returns a *PartitionError ends in PhaseFailed.
type Phase uint8

// The phases, in the order a Runner goes through them.
const (
	// PhaseIdle: NewRunner returned, Run has not started.
	PhaseIdle Phase = iota
	// PhaseRestoring: Run claims the partition and restores its state from
	// the changelog, or resumes state kept in memory or parked on disk
	// (catching it up from the changelog's tail when needed). No record is
	// processed yet; Runner.Do waits.
	PhaseRestoring
	// PhaseRunning: the state is restored; records are processed, and
	// checkpoints written, as they come.
	PhaseRunning
	// PhaseStopping: ctx ended or the source is exhausted; the final
	// checkpoint is written and the write-behind drained.
	PhaseStopping
	// PhaseStopped: Run returned nil.
	PhaseStopped
	// PhaseFailed: Run returned a *PartitionError.
	PhaseFailed
)

// String names the phase as the partitions API shows it.
func (p Phase) String() string {
	switch p {
	case PhaseIdle:
		return "idle"
	case PhaseRestoring:
		return "restoring"
	case PhaseRunning:
		return "running"
	case PhaseStopping:
		return "stopping"
	case PhaseStopped:
		return "stopped"
	case PhaseFailed:
		return "failed"
	}
	return "unknown"
}
