package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
)

// A consumer parks every partition's key store at SIGTERM; before the next
// one starts on the same state directory, two parked stores are damaged
// the ways a disk or an operator can (the MANIFEST's last record, which
// Pebble would read as the end of its log and open an older version from;
// a table file removed). The next consumer resumes only the intact store,
// removes the damaged ones and restores their partitions from the
// changelog, saying so: nothing is missing, no prediction differs from an
// uninterrupted run, no final key state differs, nothing is repeated (the
// stop was clean).
func TestBlackBoxDamagedParkedStoreIsRestored(t *testing.T) {
	b := newBlackBox(t)
	state := filepath.Join(b.dir, "state")
	b.args = append(b.args, "-state-dir", state, "-park-state", "-cache-keys", "20")
	a := b.start()
	prod := startProducer(t, b.addr, b.topic("events"), 300, 12000, 3000)
	waitFor(t, 60*time.Second, "A's first 3,000 predictions", func() bool {
		return countAll(readTopic(t, b.addr, b.topic("predictions"))) >= 3000
	})
	a.signal(t, syscall.SIGTERM)
	a.waitClean(t)
	if n := a.count(`"parked the partition's key store"`); n != blackBoxPartitions {
		t.Fatalf("A parked %d partitions, want %d:\n%s", n, blackBoxPartitions, tail(a.logText(), 3000))
	}
	damage := map[int]func(dir string){
		0: func(dir string) { // the MANIFEST's last record
			ms, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
			if len(ms) != 1 {
				t.Fatalf("%s: %d manifests", dir, len(ms))
			}
			m, err := os.ReadFile(ms[0])
			if err != nil {
				t.Fatal(err)
			}
			m[len(m)-3] ^= 0xff
			if err := os.WriteFile(ms[0], m, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		1: func(dir string) { // a table removed
			tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
			if len(tables) == 0 {
				t.Fatalf("%s: no tables", dir)
			}
			if err := os.Remove(tables[len(tables)-1]); err != nil {
				t.Fatal(err)
			}
		},
	}
	for p, f := range damage {
		f(filepath.Join(state, "parked-p"+string(rune('0'+p))))
	}
	ids := prod.finish(t)
	b.finishWith(ids)
	last := b.finishers[0]
	refused, resumed := last.count(`"cannot reopen the parked key store`), last.count(`"reopened the parked key store`)
	if refused != len(damage) || resumed != blackBoxPartitions-len(damage) {
		t.Fatalf("%d parked stores refused, %d resumed; want %d, %d:\n%s", refused, resumed, len(damage), blackBoxPartitions-len(damage), tail(last.logText(), 4000))
	}
	if dups, _ := b.verify(ids); dups != 0 {
		t.Fatalf("%d predictions repeated after a clean stop", dups)
	}
}

// The broker stops answering for 12 s — six session timeouts, and past the
// consumer's shutdown timeout, which once bounded the drain of partitions
// revoked in an outage — while events keep coming, then answers again. The
// consumer rides it through within its retry timeout: no partition fails,
// nothing is logged at ERROR, SIGTERM exits 0, and against an uninterrupted
// run nothing is missing, no prediction differs and no final key state
// differs.
func TestBlackBoxBrokerOutageIsRiddenThrough(t *testing.T) {
	b := newBlackBox(t)
	b.args = append(b.args, "-retry-timeout", "60s", "-shutdown-timeout", "5s")
	a := b.start()
	waitFor(t, 60*time.Second, "A restores its partitions", func() bool { return a.count(`"partition restored"`) >= blackBoxPartitions })
	prod := startProducer(t, b.addr, b.topic("events"), 200, 16000, 2000)
	waitFor(t, 60*time.Second, "A's first 2,000 predictions", func() bool {
		return countAll(readTopic(t, b.addr, b.topic("predictions"))) >= 2000
	})
	resume := b.pause()
	time.Sleep(12 * time.Second)
	resume()
	ids := prod.finish(t)
	b.finishWith(ids, a)
	if n := a.count(`"partition failed`); n != 0 {
		t.Fatalf("%d partitions failed in the outage:\n%s", n, tail(a.logText(), 4000))
	}
	// The outage was felt: A retried, or lost its generation and rejoined
	// (its partitions revoked, their last checkpoints out of time, then
	// restored from the changelog).
	retried, groupErrors, restored := a.count(`"msg":"retrying"`), a.count(`"consumer group error`), a.count(`"partition restored"`)
	if retried == 0 && restored <= blackBoxPartitions {
		t.Fatalf("A neither retried nor rejoined in a 12 s outage:\n%s", tail(a.logText(), 4000))
	}
	dups, _ := b.verify(ids)
	t.Logf("a 12 s outage: A logged %d retries and %d group errors, %d partitions revoked before their last checkpoint, %d restores or resumes (%d at its start); %d predictions repeated (at-least-once output)",
		retried, groupErrors, a.count(`"partition revoked before its last checkpoint`), restored, blackBoxPartitions, dups)
}

// The changelog topic is deleted under a running consumer, on a broker
// that creates a missing topic when a request names it (Apache Kafka's
// default). The consumer never recreates it by writing: its partitions
// fail with ErrChangelogGone and it exits non-zero; the topic stays absent.
// Recreating it compacted and empty (what a hurried operator would do) is
// refused too: the restore sees a log that cannot be complete (the
// group's committed offsets are far past it) and writes no output. The
// documented way out — the same configuration as a new deployment, with a
// changelog and group of its own, rebuilding every key from the input
// topics — ends with every event predicted, no prediction differing from
// an uninterrupted run and every key state identical to it.
func TestBlackBoxDeletedChangelogIsNeverRecreated(t *testing.T) {
	b := newBlackBox(t)
	a := b.start()
	prod := startProducer(t, b.addr, b.topic("events"), 200, 9000, 3000)
	waitFor(t, 60*time.Second, "A's first 2,000 predictions", func() bool {
		return countAll(readTopic(t, b.addr, b.topic("predictions"))) >= 2000
	})
	changelog := b.topic("changelog")
	kafkatest.DeleteTopic(t, b.addr, changelog)
	a.failsSaying(t, 90*time.Second, "A after its changelog was deleted", "the changelog topic is gone or changed")
	if kafkatest.TopicExists(t, b.addr, changelog) {
		t.Fatalf("the changelog %s was recreated", changelog)
	}
	ids := prod.finish(t)

	// Recreated compacted and empty: refused, nothing written.
	kafkatest.CreateTopic(t, b.addr, kafka.TopicConfig{Topic: changelog, NumPartitions: blackBoxPartitions, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}})
	before := countAll(readTopic(t, b.addr, b.topic("predictions")))
	c := b.start()
	c.failsSaying(t, 90*time.Second, "C on an empty recreated changelog", "the changelog cannot be complete")
	if after := countAll(readTopic(t, b.addr, b.topic("predictions"))); after != before {
		t.Fatalf("C wrote %d predictions from an empty changelog", after-before)
	}

	// The rebuild: a new deployment of the same configuration.
	b.changelog = "changelog-rebuilt"
	b.args = append(b.args, "-changelog-topic", b.topic(b.changelog), "-group", b.topic("rebuilt"))
	b.finishWith(ids)
	dups, _ := b.verify(ids)
	t.Logf("deleted changelog: A exited non-zero, the topic stayed absent, the empty recreated one was refused (C wrote 0 predictions); the rebuild repeated %d predictions of A's", dups)
}

// frozenFS mounts a small ext4 file system (a loop device) for a test and
// returns its directory and a function that freezes it (fsfreeze): every
// write to it then blocks, as on a hung disk. It is thawed and unmounted
// at the test's end. It needs root and loop devices: CI has both.
func frozenFS(t *testing.T) (dir string, freeze func()) {
	t.Helper()
	dir, freeze, _ = frozenFSThawed(t)
	return dir, freeze
}

// frozenFSThawed is frozenFS with a thaw, which the cleanup does if the
// test did not.
func frozenFSThawed(t *testing.T) (dir string, freeze, thaw func()) {
	t.Helper()
	for _, tool := range []string{"mkfs.ext4", "fsfreeze", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to hang a disk (util-linux, e2fsprogs): %v", tool, err)
		}
	}
	img, dir := filepath.Join(t.TempDir(), "disk.img"), t.TempDir()
	for _, cmd := range [][]string{{"truncate", "-s", "256M", img}, {"mkfs.ext4", "-q", img}, {"mount", "-o", "loop", img, dir}} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s (a hung-disk test needs root and loop devices)", cmd, err, out)
		}
	}
	frozen := false
	t.Cleanup(func() {
		if frozen {
			exec.Command("fsfreeze", "-u", dir).Run()
		}
		exec.Command("umount", "-l", dir).Run()
	})
	return dir, func() {
			if out, err := exec.Command("fsfreeze", "-f", dir).CombinedOutput(); err != nil {
				t.Fatalf("fsfreeze: %v\n%s", err, out)
			}
			frozen = true
		}, func() {
			if out, err := exec.Command("fsfreeze", "-u", dir).CombinedOutput(); err != nil {
				t.Fatalf("fsfreeze -u: %v\n%s", err, out)
			}
			frozen = false
		}
}

// The key stores' file system freezes under a running consumer (a hung
// disk, not a failing one: every write blocks). Once the key stores'
// memtables are full, their commits stall; past the stall bound (30 s)
// every partition fails loudly, as the key store's failure (published
// before the stores are closed, which waits at most 5 s), and the process
// exits non-zero after DRIFTSTREAM_FAIL_EXIT_AFTER, however long the disk
// stays frozen; it never stalls silently. (Before, each partition waited
// in removing its store on the frozen disk, and nothing was published.)
func TestBlackBoxFrozenKeyStoreDiskFailsLoudly(t *testing.T) {
	b := newBlackBox(t)
	dir, freeze := frozenFS(t)
	b.args = append(b.args, "-state-dir", filepath.Join(dir, "state"), "-cache-keys", "20")
	a := b.start()
	// Enough keys and events that the key stores' memtables fill soon
	// after the freeze: until then Pebble takes writes in memory.
	prod := startProducer(t, b.addr, b.topic("events"), 5000, 1000000, 10000)
	defer prod.cancel()
	waitFor(t, 60*time.Second, "A's first 1,000 predictions", func() bool {
		return countAll(readTopic(t, b.addr, b.topic("predictions"))) >= 1000
	})
	freeze()
	frozenAt := time.Now()
	// The process reaches its exit within the stall bound, the failure
	// grace and the close bound. A thread blocked in a write to a frozen
	// file system cannot be killed until it thaws (the kernel's
	// uninterruptible wait), so the process's end is seen in its log: the
	// failures it reports on its way out.
	waitFor(t, 150*time.Second, "the consumer's exit after its key stores failed", func() bool {
		return a.count("consumer: stopped because") > 0
	})
	took := time.Since(frozenAt)
	failed, published := a.count(`"partition failed; it stays stopped`), a.count(`"step":"key_store"`)
	t.Logf("the consumer failed %d partitions (%d at the key store) and exited %s after the freeze", failed, published, took.Round(time.Second))
	if failed != blackBoxPartitions || published != blackBoxPartitions {
		t.Fatalf("%d partitions failed, %d at the key store; want all %d:\n%s", failed, published, blackBoxPartitions, a.logLines(6000, `"level":"ERROR"`))
	}
}

// SIGTERM while the key stores' file system is frozen: parking the stores
// for the next process (a flush, a close, a rename, a manifest written
// last) blocks on the disk. The shutdown still ends within
// DRIFTSTREAM_SHUTDOWN_TIMEOUT, non-zero, saying why, with the processing
// stopped; once the disk thaws the process is gone (a thread blocked in a
// write to a frozen file system cannot be killed before), and the next
// process does not take the park it never finished: it restores from the
// changelog, and the state is exactly once.
func TestBlackBoxSIGTERMOnAFrozenKeyStoreDiskEndsInTime(t *testing.T) {
	b := newBlackBox(t)
	dir, freeze, thaw := frozenFSThawed(t)
	b.args = append(b.args, "-state-dir", filepath.Join(dir, "state"), "-cache-keys", "20", "-shutdown-timeout", "10s")
	a := b.start()
	prod := startProducer(t, b.addr, b.topic("events"), 3000, 30000, 5000)
	waitFor(t, 60*time.Second, "A's first 1,000 predictions", func() bool {
		return countAll(readTopic(t, b.addr, b.topic("predictions"))) >= 1000
	})
	ids := prod.finish(t)
	freeze()
	a.signal(t, syscall.SIGTERM)
	termAt := time.Now()
	waitFor(t, 40*time.Second, "the shutdown's end", func() bool { return a.count("shutdown took longer than 10s") > 0 })
	took := time.Since(termAt)
	thaw()
	select {
	case err := <-a.done:
		if err == nil {
			t.Fatalf("the consumer exited 0 after a shutdown that did not finish:\n%s", tail(a.logText(), 3000))
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the consumer is still running 30 s after the disk thawed:\n%s", tail(a.logText(), 3000))
	}
	t.Logf("SIGTERM on a frozen disk: the shutdown gave up %s after the signal (timeout 10s)", took.Round(100*time.Millisecond))
	if took > 15*time.Second {
		t.Fatalf("the shutdown ended %s after SIGTERM, past its 10 s timeout", took)
	}
	b.finishWith(ids)
	if next := b.finishers[len(b.finishers)-1]; next.count(`"from":"parked"`) > 0 {
		t.Fatalf("the next process resumed a park that never finished:\n%s", next.logLines(3000, "partition restored"))
	}
	b.verify(ids)
}
