package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
)

// BenchmarkKill9ToReady measures what a restarted pod waits for: a consumer
// with the shipped configuration (logreg, the additive population model,
// the intercept, the default drift detectors; d=10, 4 partitions) predicts
// every event of DRIFTSTREAM_BENCH_KEYS keys (default 100,000) ×
// DRIFTSTREAM_BENCH_EVENTS_PER_KEY labeled events (default 3; with
// DRIFTSTREAM_BENCH_LATE=1 a quarter labeled later, a quarter never) on the real
// broker at DRIFTSTREAM_KAFKA_ADDR, and is killed with SIGKILL; then,
// DRIFTSTREAM_BENCH_ROUNDS times (default 3), a new process is started and the time from its exec to /readyz
// answering 200 (every partition restored from the changelog and its input
// read to the end) is taken, and that process killed in turn. It reports
// the median, the slowest partition's restore as the process logged it,
// the changelog records the restore read and the events records it re-read
// for the inputs of events awaiting their labels. Issue 48's goal: 1M keys
// ready within 10 s. Every process has the same -instance-id, as the Helm
// chart's pod name gives a restarted container (membership.go in package
// service); DRIFTSTREAM_BENCH_INSTANCE_ID=off runs them without one, so that
// each waits for the killed one's session to time out.
//
// Run it with -benchtime 1x: each run of the function fills a topic and a
// changelog of its own, which the restarts then share.
//
//	scripts/kafka-broker.sh start 4.4.0 19392 /tmp/k44
//	DRIFTSTREAM_KAFKA_ADDR=127.0.0.1:19392 DRIFTSTREAM_BENCH_KEYS=1000000 \
//	  go test -run '^$' -bench Kill9ToReady -benchtime 1x -timeout 60m ./cmd/consumer
func BenchmarkKill9ToReady(b *testing.B) {
	addr := kafkatest.RealBroker(b, "a real broker")
	keys, perKey := envInt("DRIFTSTREAM_BENCH_KEYS", 100_000), envInt("DRIFTSTREAM_BENCH_EVENTS_PER_KEY", 3)
	const partitions, dim = 4, 10
	dir := b.TempDir()
	bin := filepath.Join(dir, "consumer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build the consumer: %v\n%s", err, out)
	}
	prefix := fmt.Sprintf("ready-%d-", time.Now().UnixNano())
	// The predictions topic exists before the consumer too: the polling of
	// its end offsets below would otherwise have the broker create it with
	// one partition, which the consumer refuses.
	for _, topic := range []string{"events", "predictions"} {
		kafkatest.CreateTopic(b, addr, kafka.TopicConfig{Topic: prefix + topic, NumPartitions: partitions, ReplicationFactor: 1})
	}
	total := keys * perKey
	r := rand.New(rand.NewPCG(1, 2))
	// With DRIFTSTREAM_BENCH_LATE=1, as the CPU benchmark's late labels:
	// half the events labeled, a quarter labeled by a label record 30 to
	// 80 records later (on the events topic, the same key), a quarter
	// never; the restores then re-read the events of the labels still
	// awaited at the kill.
	late := os.Getenv("DRIFTSTREAM_BENCH_LATE") == "1"
	type due struct {
		at  int
		msg kafka.Message
	}
	var later []due // in order of at, within a window of 80
	batch := make([]kafka.Message, 0, 100_000)
	for i := range total {
		x := make([]float64, dim)
		for d := range x {
			x[d] = float64(int(r.NormFloat64()*1e4)) / 1e4
		}
		xs, _ := json.Marshal(x)
		key, y := fmt.Appendf(nil, "customer-%07d", i%keys), 1-2*r.IntN(2)
		value := fmt.Appendf(nil, `{"id":"e%d","x":%s,"label":%d}`, i, xs, y)
		if late {
			switch r.IntN(4) {
			case 0: // labeled later
				value = fmt.Appendf(nil, `{"id":"e%d","x":%s}`, i, xs)
				later = append(later, due{i + 30 + r.IntN(51), kafka.Message{Key: key, Value: fmt.Appendf(nil, `{"id":"e%d","label":%d}`, i, y)}})
				slices.SortStableFunc(later, func(a, b due) int { return a.at - b.at })
			case 1: // never
				value = fmt.Appendf(nil, `{"id":"e%d","x":%s}`, i, xs)
			}
		}
		batch = append(batch, kafka.Message{Key: key, Value: value})
		for len(later) > 0 && (later[0].at <= i || i == total-1) {
			batch, later = append(batch, later[0].msg), later[1:]
		}
		if len(batch) >= cap(batch) || i == total-1 {
			kafkatest.Write(b, addr, prefix+"events", batch)
			batch = batch[:0]
		}
	}
	opsAddr := freeAddr(b)
	args := []string{"-brokers", addr, "-group", prefix + "g", "-dim", strconv.Itoa(dim), "-partitions", strconv.Itoa(partitions),
		"-events-topic", prefix + "events", "-predictions-topic", prefix + "predictions", "-queries-topic", prefix + "label-queries",
		"-dead-letter-topic", prefix + "dead-letters", "-alerts-topic", prefix + "drift-alerts", "-changelog-topic", prefix + "changelog",
		"-metrics-addr", opsAddr, "-log-format", "json"}
	if os.Getenv("DRIFTSTREAM_BENCH_INSTANCE_ID") != "off" { // as the Helm chart runs it: the pod's name
		args = append(args, "-instance-id", prefix+"pod-0")
	}
	start := func(n int) (*exec.Cmd, string) {
		log := filepath.Join(dir, fmt.Sprintf("consumer-%d.log", n))
		f, err := os.Create(log)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); f.Close() })
		return cmd, log
	}
	kill := func(cmd *exec.Cmd) {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	first, log := start(0)
	exited := make(chan struct{})
	go func() { first.Process.Wait(); close(exited) }()
	for deadline := time.Now().Add(30 * time.Minute); endOffsets(b, addr, prefix+"predictions", partitions) < int64(total); time.Sleep(time.Second) {
		select {
		case <-exited:
			b.Fatalf("the consumer exited before it predicted every event; its log: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("the consumer did not predict all %d events in 30 min; its log: %s", total, log)
		}
	}
	time.Sleep(6 * time.Second) // a checkpoint period (5 s) after the last event
	first.Process.Signal(syscall.SIGKILL)
	<-exited
	b.Logf("%d keys × %d events: %d changelog records written", keys, perKey, endOffsets(b, addr, prefix+"changelog", partitions))
	var ready, slowest, records, reread []float64
	for i := range envInt("DRIFTSTREAM_BENCH_ROUNDS", 3) {
		t0 := time.Now()
		cmd, log := start(i + 1)
		for !isReady(opsAddr) {
			if time.Since(t0) > 10*time.Minute {
				b.Fatalf("not ready in 10 min; its log: %s", log)
			}
			time.Sleep(10 * time.Millisecond)
		}
		ready = append(ready, time.Since(t0).Seconds())
		ms, n, re := restoredFigures(b, log)
		slowest, records, reread = append(slowest, ms/1e3), append(records, n), append(reread, re)
		kill(cmd)
	}
	b.ReportMetric(median(ready), "s/ready")
	b.ReportMetric(median(slowest), "s/slowest-restore")
	b.ReportMetric(median(records), "changelog-records")
	b.ReportMetric(median(reread), "events-reread")
}

// envInt is the integer in environment variable name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// isReady reports whether the process serving addr answers /readyz with 200.
func isReady(addr string) bool {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// restoredFigures reads a process log's "partition restored" lines: the
// slowest restore in ms and the changelog records read in all.
func restoredFigures(b *testing.B, log string) (slowestMS, records, reread float64) {
	for _, r := range restoresIn(b, log) {
		slowestMS, records = max(slowestMS, float64(r.RestoreMS)), records+float64(r.ChangelogRecords)
		reread += float64(max(r.Committed-r.ReplayFrom, 0))
	}
	return slowestMS, records, reread
}

// median of xs (sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}
