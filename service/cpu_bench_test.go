package service

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
)

// BenchmarkRealKafkaCPU compares the CPU time per event of the service with
// that of the kafka-go pass-through (pass), and of the fair baseline, the
// pass-through that decodes each event with the service's decoder, each in
// a process of its own,
// consuming the same topic of a real broker (DRIFTSTREAM_KAFKA_ADDR), so
// the broker's CPU is neither's: on a shared 2-CPU machine wall-clock rates
// swing with whoever else runs, CPU time per event much less. A process's
// CPU is read from /proc/PID/stat when its outputs pass the first tenth of
// the events and when they reach all of them; the ratio is service CPU per
// event over the pass-through's, decoding-cpu-ratio over the decoding
// pass-through's (the goal: ≤ 1.25). Alternates the three benchRounds
// times, for perceptron and lasec-ss at d = 10 and d = 50, and for the
// shipped configuration ("shipped": logreg, the additive population model,
// the intercept), the service with its shipped drift detectors (-bench
// 'RealKafkaCPU/shipped' runs those). With DRIFTSTREAM_BENCH_LATE set, half
// the events carry their label, a quarter get it 30–80 events later in a
// label record, a quarter never; the decoding pass-through writes one
// output per event. With DRIFTSTREAM_BENCH_SHARED set, the shipped
// configuration shares its shared part across the 4 partitions.
//
//	scripts/kafka-broker.sh start 4.4.0 29092 /tmp/kafka
//	DRIFTSTREAM_KAFKA_ADDR=127.0.0.1:29092 DRIFTSTREAM_BENCH_EVENTS=300000 \
//	  go test -run '^$' -bench RealKafkaCPU -benchtime 1x ./service
func BenchmarkRealKafkaCPU(b *testing.B) {
	addr := kafkatest.RealBroker(b, "a real broker")
	n := benchEvents()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	late := os.Getenv("DRIFTSTREAM_BENCH_LATE") != ""
	for _, tc := range []struct {
		learner string
		dim     int
	}{{"perceptron", 10}, {"lasec-ss", 10}, {"perceptron", 50}, {"lasec-ss", 50}, {"shipped", 10}, {"shipped", 50}} {
		name := fmt.Sprintf("%s-d%d", tc.learner, tc.dim)
		b.Run(name, func(b *testing.B) {
			events := fmt.Sprintf("cpu-%s-%s-events", run, name)
			kafkatest.CreateTopic(b, addr, kafka.TopicConfig{Topic: events, NumPartitions: 4, ReplicationFactor: 1})
			writeBenchEventsLabeled(b, addr, events, n, tc.dim, late)
			input := topicBytes(b, addr, events)
			var passCPU, decodeCPU, serviceCPU, ratio, decodeRatio, changelog []float64
			for i := range benchRounds() {
				id := fmt.Sprintf("cpu-%s-%s-%d", run, name, i)
				// Both output topics exist before their polling starts: a real
				// broker creates a topic a metadata request names, with one
				// partition.
				kafkatest.CreateTopic(b, addr, kafka.TopicConfig{Topic: id + "-pass", NumPartitions: 4, ReplicationFactor: 1})
				kafkatest.CreateTopic(b, addr, kafka.TopicConfig{Topic: id + "-decode", NumPartitions: 4, ReplicationFactor: 1})
				kafkatest.CreateTopic(b, addr, kafka.TopicConfig{Topic: "predictions-" + id, NumPartitions: 4, ReplicationFactor: 1})
				// The changelog with segments too large for the log cleaner to
				// reach within the run: what is read back after it is every
				// byte the service wrote (with the service's 64 MiB segments,
				// compaction during a run of 100k keys removed a timing-
				// dependent part of it).
				kafkatest.CreateTopic(b, addr, kafka.TopicConfig{Topic: "changelog-" + id, NumPartitions: 4, ReplicationFactor: 1,
					ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"},
						{ConfigName: "segment.bytes", ConfigValue: "1073741824"}, {ConfigName: "segment.ms", ConfigValue: "604800000"}}})
				pc := childCPUPerEvent(b, addr, id+"-pass", "", n, "pass", addr, events, id+"-pass")
				dc := childCPUPerEvent(b, addr, id+"-decode", "", n, "pass-decode", addr, events, id+"-decode")
				sc := childCPUPerEvent(b, addr, "predictions-"+id, "dead-letters-"+id, n, "service", addr, events, id, tc.learner, strconv.Itoa(tc.dim))
				passCPU, decodeCPU, serviceCPU = append(passCPU, pc), append(decodeCPU, dc), append(serviceCPU, sc)
				ratio, decodeRatio = append(ratio, sc/pc), append(decodeRatio, sc/dc)
				cl := topicBytes(b, addr, "changelog-"+id)
				changelog = append(changelog, float64(cl)/float64(input))
				b.Logf("round %d: pass-through %.2f µs/event, decoding pass-through %.2f, service %.2f: %.2f× and %.2f×; changelog %d bytes for %d of input (%.2f×)",
					i, pc, dc, sc, sc/pc, sc/dc, cl, input, float64(cl)/float64(input))
			}
			b.ReportMetric(median(passCPU), "passthrough-cpu-µs/event")
			b.ReportMetric(median(decodeCPU), "decoding-passthrough-cpu-µs/event")
			b.ReportMetric(median(decodeRatio), "decoding-cpu-ratio")
			b.ReportMetric(median(serviceCPU), "service-cpu-µs/event")
			b.ReportMetric(median(ratio), "cpu-ratio")
			b.ReportMetric(slices.Max(ratio), "max-cpu-ratio")
			b.ReportMetric(median(changelog), "changelog-bytes/input-byte")
		})
	}
}

// topicBytes is the bytes of keys and values in the four partitions of
// topic, read from a real broker at addr.
func topicBytes(b *testing.B, addr, topic string) int64 {
	b.Helper()
	var sum int64
	for p := range 4 {
		conn, err := kafka.DialLeader(context.Background(), "tcp", addr, topic, p)
		if err != nil {
			b.Fatal(err)
		}
		first, end, err := conn.ReadOffsets()
		if err == nil {
			_, err = conn.Seek(first, kafka.SeekAbsolute)
		}
		for off := first; err == nil && off < end; {
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			batch := conn.ReadBatch(1, 16<<20)
			for {
				m, merr := batch.ReadMessage()
				if merr != nil {
					break
				}
				sum += int64(len(m.Key) + len(m.Value))
				off = m.Offset + 1
			}
			err = batch.Close()
		}
		conn.Close()
		if err != nil {
			b.Fatalf("read %s/%d: %v", topic, p, err)
		}
	}
	return sum
}

// childCPUPerEvent runs this test binary again as a process of kind "pass"
// or "service" (TestBenchCPUChild, with args), waits until the topic out
// holds n records, and returns the process's CPU time in µs per record
// written from the first tenth of n on. It stops the process with SIGTERM.
// With dead set (the service's dead-letter topic) it fails as soon as the
// records there keep out from reaching n.
func childCPUPerEvent(b *testing.B, addr, out, dead string, n int, kind string, args ...string) float64 {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchCPUChild$")
	cmd.Env = append(os.Environ(), "DRIFTSTREAM_BENCH_CHILD="+kind+"|"+strings.Join(args, "|"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			b.Errorf("%s process: %v", kind, err)
		}
	}()
	wait := func(want int64) (int64, time.Duration) {
		deadline := time.Now().Add(5 * time.Minute)
		for tick := 0; ; tick++ {
			if got := written(addr, out); got >= want {
				return got, procCPU(b, cmd.Process.Pid)
			} else if dead != "" && got > 0 && tick%200 == 0 { // every second, once the service made its topics: an event dead-lettered never reaches out
				if d := written(addr, dead); d > 0 && got+d >= want {
					b.Fatalf("%s process: %d records in %s and %d in %s: the run cannot reach %d", kind, got, out, d, dead, want)
				}
			}
			select {
			case err := <-exited:
				b.Fatalf("%s process ended: %v", kind, err)
			case <-time.After(5 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s process: fewer than %d records in %s after 5 min", kind, want, out)
			}
		}
	}
	from, c0 := wait(int64(n / 10))
	to, c1 := wait(int64(n))
	fmt.Fprintf(os.Stderr, "%s: %d records in %s, %s of CPU from the %dth\n", kind, to, out, c1-c0, from)
	return float64((c1 - c0).Nanoseconds()) / 1e3 / float64(to-from)
}

// procCPU is the user and system CPU time of process pid so far.
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which ends at the last ')': state is
	// the first, utime the 12th, stime the 13th, in clock ticks (100 a
	// second on Linux).
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// TestBenchCPUChild is BenchmarkRealKafkaCPU's child process, not a test of
// its own (the os/exec helper-process pattern): with
// DRIFTSTREAM_BENCH_CHILD=pass|ADDR|IN|OUT it runs the pass-through (pass-decode:
// the decoding one), with
// DRIFTSTREAM_BENCH_CHILD=service|ADDR|IN|RUN|LEARNER|DIM the service, until
// SIGTERM. DRIFTSTREAM_BENCH_CPUPROFILE=PATH writes each service child's
// CPU profile to PATH.RUN.
func TestBenchCPUChild(t *testing.T) {
	spec := os.Getenv("DRIFTSTREAM_BENCH_CHILD")
	if spec == "" {
		t.Skip("only BenchmarkRealKafkaCPU's child process")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	a := strings.Split(spec, "|")
	switch a[0] {
	case "pass", "pass-decode":
		if err := pass(ctx, a[1], a[2], a[3], 4, false, a[0] == "pass-decode"); err != nil {
			t.Fatal(err)
		}
	case "service":
		if path := os.Getenv("DRIFTSTREAM_BENCH_CPUPROFILE"); path != "" { // where the service's CPU goes
			f, err := os.Create(path + "." + a[3])
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				t.Fatal(err)
			}
			defer pprof.StopCPUProfile()
		}
		dim, _ := strconv.Atoi(a[5])
		cfg, err := benchConfig(a[1], a[3], a[4], dim)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Topics.Events = a[2]
		s, err := New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(ctx); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("DRIFTSTREAM_BENCH_CHILD=%q", spec)
	}
}
