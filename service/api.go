package service

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/topics"
)

// The HTTP API answers about the keys this member holds, as Kafka Streams'
// interactive queries and goka's views do: each member answers for the
// partitions it owns, and says which partition a key it does not hold
// belongs to. Reads and writes of learner state go through the partition's
// own goroutine (pipeline.Runner.Do): no locks on learner state, and a reset
// is checkpointed before it is acknowledged.

// ErrKeyNotHeld is returned for a key that none of this member's running
// partitions holds (KeyNotHeldError says more).
var ErrKeyNotHeld = errors.New("key not held")

// KeyNotHeldError says where a key this member does not hold would live.
type KeyNotHeldError struct {
	Key string `json:"key"`
	// Owned are the partitions this member runs, Restoring those of them
	// not yet restored (the key may be there once they are).
	Owned     []int `json:"owned_partitions"`
	Restoring []int `json:"restoring_partitions,omitempty"`
	// Partitions is the key's events-topic partition under each common
	// producer partitioner (docs/spec/DESIGN.md §2: events and labels must agree).
	Partitions map[string]int `json:"partition_by_partitioner"`
}

func (e *KeyNotHeldError) Error() string {
	restoring := ""
	if len(e.Restoring) > 0 {
		restoring = fmt.Sprintf(", of which %v are still restoring and may hold it", e.Restoring)
	}
	return fmt.Sprintf("key %q is not held by this member (partitions %v%s); its partition is %d with murmur2 (Java clients), %d with crc32 (librdkafka, kcat), %d with fnv1a (kafka-go, Sarama): ask the member that owns it",
		e.Key, e.Owned, restoring, e.Partitions["murmur2"], e.Partitions["crc32"], e.Partitions["fnv1a"])
}

func (e *KeyNotHeldError) Unwrap() error { return ErrKeyNotHeld }

// PartitionInfo is what GET /v1/partitions shows of one owned partition.
type PartitionInfo struct {
	Partition int `json:"partition"`
	// State is the partition Runner's phase (pipeline.Phase): idle,
	// restoring, running, stopping, stopped or failed; busy when a running
	// partition did not answer within the call's time.
	State string `json:"state"`
	// Keys held; −1 when the partition is not running.
	Keys int `json:"keys"`
	// KeysInMemory of them are in memory (all without a key store); −1 when
	// the partition is not running.
	KeysInMemory int `json:"keys_in_memory"`
	// Lag is high watermark − next offset of the events topic, as of the
	// last record processed.
	Lag int64 `json:"lag"`
	// ResumedFromMemory: the partition resumed the state this process kept
	// in memory across a rebalance; ResumedFromParked: the key store a
	// former process parked (neither: restored from the changelog).
	ResumedFromMemory bool `json:"resumed_from_memory"`
	ResumedFromParked bool `json:"resumed_from_parked"`
	// CaughtUp is, for a resumed partition, how many changelog positions
	// that other members wrote since its state was kept were read to bring
	// it up to date (0: nothing came between).
	CaughtUp int64  `json:"caught_up_records"`
	Error    string `json:"error,omitempty"`
}

// running lists the owned partitions: their states, sorted by partition.
func (s *Service) running() []*partState {
	var out []*partState
	s.parts.Range(func(_, v any) bool {
		out = append(out, v.(*partState))
		return true
	})
	slices.SortFunc(out, func(a, b *partState) int { return a.p - b.p })
	return out
}

// Inspect describes key, asked of the partition that holds it.
func (s *Service) Inspect(ctx context.Context, key string) (pipeline.KeyInfo, error) {
	return s.onKey(ctx, key, func(w *pipeline.Worker) (pipeline.KeyInfo, bool, bool, error) {
		in, ok, err := w.Inspect(key)
		return in, ok, false, err
	})
}

// ResetKey restarts key's learner and drift detectors on the partition that
// holds it, and returns the key afterwards; the reset is checkpointed before
// ResetKey returns, so a restore or another member starts from it.
func (s *Service) ResetKey(ctx context.Context, key string) (pipeline.KeyInfo, error) {
	return s.onKey(ctx, key, func(w *pipeline.Worker) (pipeline.KeyInfo, bool, bool, error) {
		ok, err := w.Reset(key)
		if !ok || err != nil {
			return pipeline.KeyInfo{}, ok, false, err
		}
		in, _, err := w.Inspect(key)
		return in, true, true, err
	})
}

// onKey runs fn on each restored partition until one holds key. fn reports
// whether it found the key and whether it changed it (then the partition
// checkpoints before it answers).
func (s *Service) onKey(ctx context.Context, key string, fn func(w *pipeline.Worker) (info pipeline.KeyInfo, found, changed bool, err error)) (pipeline.KeyInfo, error) {
	notHeld := &KeyNotHeldError{Key: key, Owned: []int{}, Partitions: s.keyPartitions(key)}
	for _, st := range s.running() {
		notHeld.Owned = append(notHeld.Owned, st.p)
		r := st.runner.Load()
		if r == nil || r.Snapshot().Phase < pipeline.PhaseRunning {
			notHeld.Restoring = append(notHeld.Restoring, st.p)
			continue
		}
		var (
			info  pipeline.KeyInfo
			found bool
			fnErr error
		)
		err := r.Do(ctx, func(w *pipeline.Worker) (changed bool) {
			info, found, changed, fnErr = fn(w)
			return changed
		})
		switch {
		case errors.Is(err, pipeline.ErrNotRunning):
			continue // failed or just revoked
		case err != nil:
			return pipeline.KeyInfo{}, fmt.Errorf("partition %d: %w", st.p, err)
		case fnErr != nil:
			return pipeline.KeyInfo{}, fmt.Errorf("partition %d: %w", st.p, fnErr)
		case found:
			return info, nil
		}
	}
	return pipeline.KeyInfo{}, notHeld
}

// keyPartitions is key's events-topic partition under each common producer
// partitioner.
func (s *Service) keyPartitions(key string) map[string]int {
	if s.eventPartitions < 1 {
		return nil
	}
	return topics.PartitionOf([]byte(key), s.eventPartitions)
}

// Partitions describes the partitions this member owns.
func (s *Service) Partitions(ctx context.Context) []PartitionInfo {
	s.mu.Lock()
	failed := map[int]error{}
	for p, err := range s.failed {
		failed[p] = err
	}
	s.mu.Unlock()
	out := []PartitionInfo{}
	for _, st := range s.running() {
		snap := st.snapshot()
		res := snap.Restore
		pi := PartitionInfo{Partition: st.p, State: snap.Phase.String(), Keys: -1, KeysInMemory: -1, Lag: snap.Lag,
			ResumedFromMemory: res.Origin == pipeline.FromMemory, ResumedFromParked: res.Origin == pipeline.FromParked, CaughtUp: res.CaughtUp}
		if err, ok := failed[st.p]; ok {
			pi.State, pi.Error = pipeline.PhaseFailed.String(), err.Error()
		} else if r := st.runner.Load(); r != nil && snap.Phase == pipeline.PhaseRunning {
			var keys, resident int // written on the partition's goroutine, read only once Do answered
			err := r.Do(ctx, func(w *pipeline.Worker) bool { keys, resident = w.Keys(), w.Resident(); return false })
			switch {
			case err == nil:
				pi.Keys, pi.KeysInMemory = keys, resident
			case errors.Is(err, pipeline.ErrNotRunning):
				pi.State = r.Snapshot().Phase.String() // it stopped meanwhile
			default:
				pi.State, pi.Error = "busy", err.Error()
			}
		}
		out = append(out, pi)
		delete(failed, st.p)
	}
	for p, err := range failed { // stopped for good: no longer among the running
		out = append(out, PartitionInfo{Partition: p, State: pipeline.PhaseFailed.String(), Keys: -1, KeysInMemory: -1, Error: err.Error()})
	}
	slices.SortFunc(out, func(a, b PartitionInfo) int { return a.Partition - b.Partition })
	return out
}

// APITimeout bounds one API call's wait for a partition's goroutine.
const APITimeout = 10 * time.Second

// API is the HTTP API over a service, served next to /metrics:
//
//	GET  /v1/keys/{key}        a key's learner, counters, pending labels, offsets, last drift alert
//	POST /v1/keys/{key}/reset  restart the key's learner (needs the admin token)
//	GET  /v1/partitions        the partitions this member owns
//
// A key this member does not hold is a 404 that names its partition. Write
// calls are refused (403) unless adminToken is set, and then need the header
// "Authorization: Bearer <adminToken>" (401 otherwise).
func API(s *Service, adminToken string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/keys/{key}", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), APITimeout)
		defer cancel()
		info, err := s.Inspect(ctx, r.PathValue("key"))
		answer(w, info, err)
	})
	mux.HandleFunc("POST /v1/keys/{key}/reset", func(w http.ResponseWriter, r *http.Request) {
		if adminToken == "" {
			writeJSON(w, http.StatusForbidden, apiError{Error: "write calls are disabled: set DRIFTSTREAM_ADMIN_TOKEN to enable them"})
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(adminToken)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="driftstream"`)
			writeJSON(w, http.StatusUnauthorized, apiError{Error: "missing or wrong admin token: send Authorization: Bearer <DRIFTSTREAM_ADMIN_TOKEN>"})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), APITimeout)
		defer cancel()
		info, err := s.ResetKey(ctx, r.PathValue("key"))
		answer(w, info, err)
	})
	mux.HandleFunc("GET /v1/partitions", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), APITimeout)
		defer cancel()
		writeJSON(w, http.StatusOK, map[string]any{"partitions": s.Partitions(ctx)})
	})
	return mux
}

// apiError is the body of an API error.
type apiError struct {
	Error   string           `json:"error"`
	NotHeld *KeyNotHeldError `json:"not_held,omitempty"`
}

func answer(w http.ResponseWriter, info pipeline.KeyInfo, err error) {
	var nh *KeyNotHeldError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, info)
	case errors.As(err, &nh):
		code := http.StatusNotFound
		if len(nh.Restoring) > 0 {
			code = http.StatusServiceUnavailable // it may be in a partition still restoring
			w.Header().Set("Retry-After", "1")
		}
		writeJSON(w, code, apiError{Error: err.Error(), NotHeld: nh})
	case errors.Is(err, context.DeadlineExceeded):
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, apiError{Error: err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
