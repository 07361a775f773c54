package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The main job on the embedded broker: every demo event is processed and
// predicted, queries are answered by the demo producer, and the final JSON
// line has the promised fields.
func TestEmbeddedDemo(t *testing.T) {
	metricsAddr := freeAddr(t)
	var out, errb bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- run([]string{"-embedded", "-embedded-addr", "127.0.0.1:0", "-demo-events", "20000", "-demo-rate", "0", "-demo-keys", "20",
			"-learner", "lasec-ss", "-learner-params", `{"a":0.2}`, "-checkpoint-every", "200", "-metrics-addr", metricsAddr, "-log-format", "text"}, &out, &errb)
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + metricsAddr + path)
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var code int
	scraped := false
	for !scraped {
		select {
		case code = <-exit:
			t.Fatalf("exited (%d) before /metrics showed events: %s", code, errb.String())
		case <-time.After(5 * time.Millisecond):
		}
		// Scraped once a labeled event is counted: the window accuracy
		// exists from a partition's first one.
		if status, body := get("/metrics"); status == 200 && strings.Contains(body, "driftstream_labeled_total") && !strings.Contains(body, "driftstream_labeled_total 0\n") {
			for _, name := range []string{"driftstream_predictions_total", "driftstream_labeled_total", "driftstream_consumer_lag{partition=", "driftstream_window_accuracy{partition=",
				"driftstream_checkpoint_duration_seconds_bucket", "driftstream_keys{partition=", "go_goroutines", "process_cpu_seconds_total",
				`driftstream_build_info{commit="unknown",goversion="go`} {
				if !strings.Contains(body, name) {
					t.Errorf("/metrics lacks %s", name)
				}
			}
			if strings.Contains(body, "entity-") {
				t.Error("a metric is labelled by entity key")
			}
			if s, _ := get("/healthz"); s != 200 {
				t.Errorf("/healthz %d", s)
			}
			// Partitions restore one by one: ready once all have.
			deadline := time.Now().Add(10 * time.Second)
			s, body := get("/readyz")
			for ; s != 200 && time.Now().Before(deadline); s, body = get("/readyz") {
				time.Sleep(10 * time.Millisecond)
			}
			if s != 200 {
				t.Errorf("/readyz %d while processing: %s", s, body)
			}
			if s, _ := get("/debug/pprof/"); s != 404 {
				t.Errorf("pprof served without -pprof: %d", s)
			}
			scraped = true
		}
	}
	if code = <-exit; code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var sum map[string]float64
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("stdout %q: %v", out.String(), err)
	}
	for _, k := range []string{"events", "predictions", "label_queries", "labels_joined", "dead_letters", "accuracy", "events_per_sec"} {
		if _, ok := sum[k]; !ok {
			t.Fatalf("summary lacks %q: %s", k, out.String())
		}
	}
	if sum["events"] < 20000 || sum["predictions"] != sum["events"] || sum["label_queries"] == 0 || sum["accuracy"] < 0.55 {
		t.Fatalf("summary %s", out.String())
	}
	if !strings.Contains(errb.String(), "embedded Kafka broker listening on 127.0.0.1:") {
		t.Fatalf("stderr %q", errb.String())
	}
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		frag string
	}{
		{[]string{"-learner", "lasec"}, "no brokers"},
		{[]string{"-brokers", "x:1", "-learner", "nope", "-dim", "3"}, `unknown learner "nope"`},
		{[]string{"-brokers", "x:1", "-dim", "3", "-demo-events", "5"}, "-demo-events needs -embedded"},
		{[]string{"-brokers", "x:1"}, "DRIFTSTREAM_DIM"},
		{[]string{"-brokers", "x", "-dim", "3"}, "no port"},
		{[]string{"-brokers", "x:1", "-dim", "3", "-sasl-mechanism", "plain"}, "DRIFTSTREAM_SASL_USERNAME"},
		{[]string{"-embedded", "-brokers", "x:1"}, "exclude each other"},
		// Sizes are checked before anything is allocated: a full second-order
		// learner over 2^16 hashed features would need 34 GB per key.
		{[]string{"-brokers", "x:1", "-learner", "lasec-ss", "-hash-bits", "16"}, "over the per-key memory budget of 256.0 MiB"},
		{[]string{"-brokers", "x:1", "-hash-bits", "16"}, "a key record of learner logreg in dimension 65537 can reach 1.6 MiB"},
		{[]string{"-brokers", "x:1", "-learner", "lasec-ss", "-dim", "500"}, "over DRIFTSTREAM_MAX_KEY_BYTES"},
		{[]string{"-brokers", "x:1", "-learner", "lasec-ss", "-hash-bits", "10"}, `"diagonal": true`},
		{[]string{"-brokers", "x:1", "-dim", "3", "-retry-timeout", "0s"}, "DRIFTSTREAM_RETRY_TIMEOUT"},
	}
	for _, tc := range tests {
		var errb bytes.Buffer
		if code := run(tc.args, &bytes.Buffer{}, &errb); code != exitUsage || !strings.Contains(errb.String(), tc.frag) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errb.String(), tc.frag)
		}
	}
}

// /readyz says why it is not ready: restoring, or a failed partition.
func TestReadyzGivesTheReason(t *testing.T) {
	reason := "1 partition(s) failed [2]: partition 2 failed at store: not authorized; the process exits within 30s"
	var ready atomic.Bool
	srv, addr, err := serveOps("127.0.0.1:0", prometheus.NewRegistry(), func() (bool, string) { return ready.Load(), reason }, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	get := func() (int, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, reason) {
		t.Fatalf("not ready: %d %q", code, body)
	}
	ready.Store(true)
	if code, _ := get(); code != http.StatusOK {
		t.Fatalf("ready: %d", code)
	}
}

// The demo speaks named features when the service hashes them, and ends
// after its events even when some are dead letters.
func TestEmbeddedDemoWithHashedFeatures(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"-embedded", "-embedded-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0", "-hash-bits", "8", "-learner", "perceptron",
		"-demo-events", "2000", "-demo-rate", "0", "-log-format", "text"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var sum map[string]float64
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil || sum["events"] < 2000 || sum["dead_letters"] != 0 {
		t.Fatalf("summary %s (%v)", out.String(), err)
	}
}

// The demo's truth forgets labels nobody asked for once two spans of newer
// ones came, so that it stays bounded however long the demo runs, and gives
// each asked label once.
func TestDemoTruthIsBounded(t *testing.T) {
	tr := newTruth()
	for i := range 3 * truthSpan {
		tr.put(strconv.Itoa(i), "k", 1)
	}
	if n := len(tr.labels) + len(tr.old); n > 2*truthSpan {
		t.Fatalf("truth holds %d labels after %d puts; bound %d", n, 3*truthSpan, 2*truthSpan)
	}
	if _, ok := tr.take("0"); ok {
		t.Fatal("the oldest label is still held")
	}
	last := strconv.Itoa(3*truthSpan - 1)
	if l, ok := tr.take(last); !ok || l.key != "k" || l.label != 1 {
		t.Fatalf("the newest label: %+v %v", l, ok)
	}
	if _, ok := tr.take(last); ok {
		t.Fatal("a label was given twice")
	}
	prev := strconv.Itoa(2*truthSpan - 1) // in the previous generation
	if _, ok := tr.take(prev); !ok {
		t.Fatal("a label one generation back is lost")
	}
}

// In production (a real broker, JSON logs) every stderr line is a JSON log
// record — the plain-text progress line stays out — and a Ctrl-C stops
// cleanly: exit 0, no ERROR record, "stopped cleanly" last.
func TestJSONLogsAndACleanInterrupt(t *testing.T) {
	kafkatest.Slow(t)
	c := kafkatest.Cluster(t, kfake.SeedTopics(-1))
	var out, errb kafkatest.LogBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run([]string{"-brokers", c.ListenAddrs()[0], "-dim", "3", "-metrics-addr", "127.0.0.1:0", "-log-format", "json"}, &out, &errb)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(errb.String(), "partition restored") {
		if time.Now().After(deadline) {
			t.Fatalf("never started: %s", errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2500 * time.Millisecond) // past the 2 s progress period
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exit:
		if code != exitOK {
			t.Fatalf("exit %d after Ctrl-C: %s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not stop after Ctrl-C")
	}
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	for _, l := range lines {
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("a stderr line that is not a JSON log record: %q", l)
		}
		if rec.Level == "ERROR" {
			t.Fatalf("an ERROR record on a clean stop: %s", l)
		}
	}
	if !strings.Contains(lines[len(lines)-1], "stopped cleanly") {
		t.Fatalf("last line %q", lines[len(lines)-1])
	}
}

// A SIGTERM while the service is still starting (here: while the broker
// takes its time creating the topics) ends it cleanly, exit 0, with the
// reason logged: nothing ran, nothing is lost, and a rollout that stops a
// starting pod is not a failure.
func TestSignalWhileStartingExitsCleanly(t *testing.T) {
	kafkatest.Slow(t)
	bin := filepath.Join(t.TempDir(), "consumer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	c := kafkatest.Cluster(t)
	c.ControlKey(kmsg.CreateTopics.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		time.Sleep(1500 * time.Millisecond) // a slow controller
		return nil, nil, false
	})
	var out bytes.Buffer
	cmd := exec.Command(bin, "-brokers", c.ListenAddrs()[0], "-dim", "3", "-metrics-addr", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "stopped by a signal while starting") {
			t.Fatalf("exit %v, output:\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("still running 30 s after SIGTERM")
	}
}

// With DRIFTSTREAM_API_ADDR the key API is served on its own address, and
// the metrics address no longer serves it.
func TestTheKeyAPIOnItsOwnAddress(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "api\n") })
	apiSrv, apiAddr, err := serveAPI("127.0.0.1:0", api)
	if err != nil {
		t.Fatal(err)
	}
	defer apiSrv.Close()
	ops, opsAddr, err := serveOps("127.0.0.1:0", prometheus.NewRegistry(), func() (bool, string) { return true, "" }, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	status := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("http://" + apiAddr + "/v1/partitions"); got != http.StatusOK {
		t.Fatalf("the API address answers %d", got)
	}
	if got := status("http://" + opsAddr + "/v1/partitions"); got != http.StatusNotFound {
		t.Fatalf("the metrics address answers %d for the API", got)
	}
	if got := status("http://" + apiAddr + "/metrics"); got != http.StatusNotFound {
		t.Fatalf("the API address serves /metrics: %d", got)
	}
}
