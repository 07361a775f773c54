package service

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/faultfs"
	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A key store whose disk fills up, or hangs, fails its own partition and
// no other: /readyz turns not ready naming the cause, the partition's
// failure is counted under kind="key_store", the other partitions keep
// processing, the process does not panic, and Run returns the error
// FailExitAfter later. The member that takes over restores the partition
// from the changelog: against an uninterrupted run of the same events,
// nothing is missing, no prediction differs, no final key state differs.
func TestKeyStoreDiskFaultsFailOnlyTheirPartition(t *testing.T) {
	kafkatest.Slow(t)
	for _, tc := range []struct {
		name  string
		full  bool
		cause string // in the readiness reason
	}{
		{"disk full", true, "no space left on device"},
		{"disk hangs", false, "write stall"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := cluster(t)
			cfg := testConfig(t, addr, "g-disk")
			faults := faultfs.New("/keys-p1-")
			// Not t.TempDir: the failed store's Pebble goes on retrying its
			// flush in the background after Close (which does not wait for
			// it), writing into the directory while it is removed. Disarmed,
			// the retry succeeds and stops; then the directory goes.
			dir, err := os.MkdirTemp("", "disk-faults-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				faults.Arm(false, nil)
				for range 50 {
					if os.RemoveAll(dir) == nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				t.Errorf("state dir %s not removed", dir)
			})
			cfg.StateDir, cfg.CacheKeys = dir, 2
			cfg.FailExitAfter = 3 * time.Second
			cfg.KeyStore.FS, cfg.KeyStore.MemTableBytes, cfg.KeyStore.StallTimeout = faults, 16<<10, 2*time.Second
			m, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			cfg.Metrics = m
			if _, err := New(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			ids := produce(t, addr, 41, 900)
			s, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- s.Run(context.Background()) }()
			eventually(t, 60*time.Second, func() bool { return s.Totals().Events >= 900 }, func() string { return fmt.Sprintf("%+v", s.Totals()) })
			stall := make(chan struct{})
			defer close(stall) // Pebble's stalled flush may finish once the test is over
			if tc.full {
				faults.Arm(true, nil)
			} else {
				faults.Arm(false, stall)
			}
			ids = append(ids, produce(t, addr, 42, 3000)...)
			eventually(t, 60*time.Second, s.isFailedAny, func() string {
				return fmt.Sprintf("no partition failed; %d table writes faulted; %+v", faults.Faulted(), s.Totals())
			})
			ok, reason := s.Ready()
			if ok || !strings.Contains(reason, "partition 1 failed at key_store") || !strings.Contains(reason, tc.cause) {
				t.Fatalf("ready %v, reason %q: want partition 1 failed by %q", ok, reason, tc.cause)
			}
			if s.isFailed(0) || s.isFailed(2) {
				t.Fatalf("partitions 0 and 2 failed too: %q", reason)
			}
			total := 0.0
			for _, step := range pipeline.Steps {
				total += testutil.ToFloat64(m.partitionErrors.WithLabelValues(string(step)))
			}
			if got := testutil.ToFloat64(m.partitionErrors.WithLabelValues("key_store")); total != 1 || got != 1 {
				t.Fatalf("partition_errors_total: %v in all, {kind=key_store} = %v; want 1, 1 (reason %q)", total, got, reason)
			}
			// The other partitions go on: more events, predicted while
			// partition 1 is failed.
			before := s.Totals().Events
			ids = append(ids, produce(t, addr, 43, 300)...)
			eventually(t, 30*time.Second, func() bool { return s.Totals().Events > before+100 }, func() string {
				return fmt.Sprintf("the healthy partitions stopped: %+v", s.Totals())
			})
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.cause) {
					t.Fatalf("Run returned %v, want the key store's failure", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("Run did not return after the partition failed")
			}
			// A member on a healthy disk takes over and finishes.
			next := cfg
			next.StateDir = t.TempDir()
			next.KeyStore.FS = nil
			last, stop := started(t, next)
			eventually(t, 60*time.Second, func() bool {
				missing, _ := deliveries(ids, predictionsByID(t, addr))
				return missing == 0
			}, func() string { return fmt.Sprintf("not every event predicted: %+v", last.Totals()) })
			stop()
			repeated := matchesAnUninterruptedRun(t, addr, cfg, ids)
			if repeated > 2*cfg.CheckpointEvery { // one partition failed: at most two checkpoint intervals
				t.Fatalf("%d predictions repeated, want ≤ %d", repeated, 2*cfg.CheckpointEvery)
			}
			t.Logf("%s: %d table writes faulted; %d predictions repeated by the restart (at-least-once output)", tc.name, faults.Faulted(), repeated)
		})
	}
}
