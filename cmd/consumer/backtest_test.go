package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

func TestBacktestCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"backtest", "-data", "synth:switching-gaussian?T=2000&d=5&period=400", "-learners", "perceptron,lasec,perceptron-ss",
		"-params", `{"lasec":{"c":20}}`, "-repeats", "2", "-query-rate-target", "0.3", "-out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var sum struct {
		Events   int `json:"events"`
		Learners []struct {
			Name      string          `json:"name"`
			Params    json.RawMessage `json:"params"`
			QueryRate float64         `json:"query_rate"`
		} `json:"learners"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("summary.json: %v", err)
	}
	var lasecParams map[string]float64
	json.Unmarshal(sum.Learners[1].Params, &lasecParams)
	if sum.Events != 2000 || len(sum.Learners) != 3 || lasecParams["c"] != 20 {
		t.Fatalf("summary %s", b)
	}
	// Calibrated on repeat 0; repeat 1 re-draws the stream, so the mean wanders a little.
	if q := sum.Learners[2].QueryRate; q < 0.25 || q > 0.35 || !strings.Contains(string(sum.Learners[2].Params), `"b"`) {
		t.Fatalf("perceptron-ss not calibrated: rate %v params %s", q, sum.Learners[2].Params)
	}
	if !strings.Contains(out.String(), "lasec") || !strings.Contains(errb.String(), "repeat 2/2") {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
}

func TestBacktestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		frag string
	}{
		{[]string{"-learners", "perceptron", "-out", dir}, "-data is required"},
		{[]string{"-data", "synth:sea", "-out", dir}, "-learners is required"},
		{[]string{"-data", "synth:sea", "-learners", "perceptron"}, "-out is required"},
		{[]string{"-data", "synth:sea", "-learners", "percepton", "-out", dir}, `unknown learner "percepton"`},
		{[]string{"-data", "synth:nope", "-learners", "perceptron", "-out", dir}, "valid generators"},
		{[]string{"-data", "synth:sea?x=1", "-learners", "perceptron", "-out", dir}, `unknown parameter "x"`},
		{[]string{"-data", "synth:sea", "-learners", "lasec", "-params", `{"lasec":{"q":1}}`, "-out", dir}, `unknown parameter "q"`},
		{[]string{"-data", "synth:sea", "-learners", "lasec", "-params", `{"sop":{}}`, "-out", dir}, "not in -learners"},
		{[]string{"-data", "synth:sea", "-learners", "lasec", "-query-rate-target", "1.5", "-out", dir}, "query-rate-target"},
		{[]string{"-data", "data.parquet", "-learners", "lasec", "-out", dir}, "-format"},
		{[]string{"-data", "x.csv", "-learners", "lasec", "-label", "last", "-out", dir}, "positive"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var errb bytes.Buffer
			if code := run(append([]string{"backtest"}, tc.args...), &bytes.Buffer{}, &errb); code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), tc.frag) {
				t.Fatalf("stderr %q lacks %q", errb.String(), tc.frag)
			}
		})
	}
}

// Several misplaced flags or parameters: the error names the first by
// name, every time.
func TestBacktestUsageErrorsNameTheFirst(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		frag string
	}{
		{[]string{"-data", "synth:sea", "-learners", "lasec", "-params", `{"sop":{},"bbq":{},"odm":{}}`, "-out", dir}, "parameters for bbq"},
		{[]string{"-experiment", "crammer-random-d5", "-window", "5", "-learners", "lasec", "-data", "synth:sea", "-query-rate-target", "0.1", "-out", dir}, "-data does not apply"},
	}
	for _, tc := range tests {
		for range 10 {
			var errb bytes.Buffer
			if code := run(append([]string{"backtest"}, tc.args...), &bytes.Buffer{}, &errb); code != exitUsage || !strings.Contains(errb.String(), tc.frag) {
				t.Fatalf("%v: exit %d, stderr %q, want %d and %q", tc.args, code, errb.String(), exitUsage, tc.frag)
			}
		}
	}
}

// Keyed and topic backtests run the service's pipeline and write a report
// per learner with per-key figures; the same stream from a file and from the
// topic the producer wrote it to gives the same report.
func TestKeyedAndTopicBacktests(t *testing.T) {
	c := kafkatest.Cluster(t, kfake.SeedTopics(3, "events"))
	addr := c.ListenAddrs()[0]
	data := "synth:switching-gaussian?T=3000&d=4&period=1000"
	if code := runProducerForTest(t, addr, data); code != 0 {
		t.Fatalf("producer exit %d", code)
	}
	read := func(dir string) []map[string]any {
		b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		var reps []map[string]any
		if err := json.Unmarshal(b, &reps); err != nil {
			t.Fatalf("summary.json: %v", err)
		}
		return reps
	}
	fileDir, topicDir := t.TempDir(), t.TempDir()
	var errb bytes.Buffer
	if code := run([]string{"backtest", "-keyed", "-data", data + "&keys=30", "-labels-delay", "5", "-partitions", "3",
		"-learners", "perceptron,lasec-ss", "-out", fileDir, "-q"}, &bytes.Buffer{}, &errb); code != exitOK {
		t.Fatalf("keyed backtest exit %d: %s", code, errb.String())
	}
	if code := run([]string{"backtest", "-brokers", addr, "-topic", "events", "-dim", "4",
		"-learners", "perceptron,lasec-ss", "-out", topicDir, "-q"}, &bytes.Buffer{}, &errb); code != exitOK {
		t.Fatalf("topic backtest exit %d: %s", code, errb.String())
	}
	file, topic := read(fileDir), read(topicDir)
	if len(file) != 2 || len(topic) != 2 {
		t.Fatalf("%d and %d reports", len(file), len(topic))
	}
	for i := range file {
		ft, tt := file[i]["totals"].(map[string]any), topic[i]["totals"].(map[string]any)
		if ft["Events"] != 3000.0 || file[i]["keys"] != 30.0 || ft["DelayedLabeled"] == 0.0 {
			t.Fatalf("file report %v", file[i])
		}
		for _, k := range []string{"Events", "Labeled", "Mistakes", "Queries", "DelayedLabeled"} {
			if ft[k] != tt[k] {
				t.Fatalf("%s: %s %v from the file, %v from the topic", file[i]["name"], k, ft[k], tt[k])
			}
		}
	}
	// The same records in the same order in every partition: each key in the
	// same partition with the same counters.
	if f, tp := readFile(t, filepath.Join(fileDir, "keys.csv")), readFile(t, filepath.Join(topicDir, "keys.csv")); f != tp || strings.Count(f, "\n") != 61 {
		t.Fatalf("keys.csv from the file:\n%.400s\nfrom the topic:\n%.400s", f, tp)
	}
	for _, args := range [][]string{
		{"backtest", "-topic", "events", "-dim", "4", "-learners", "perceptron", "-out", fileDir},
		{"backtest", "-brokers", addr, "-topic", "events", "-learners", "perceptron", "-out", fileDir},
		{"backtest", "-brokers", addr, "-topic", "events", "-dim", "4", "-from", "yesterday", "-learners", "perceptron", "-out", fileDir},
	} {
		if code := run(args, &bytes.Buffer{}, &bytes.Buffer{}); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// runProducerForTest writes data to the events topic as cmd/producer does:
// 30 keys, labels 5 events late.
func runProducerForTest(t *testing.T, addr, data string) int {
	t.Helper()
	src, err := streams.OpenSynth(data, 1)
	if err != nil {
		t.Fatal(err)
	}
	balancer, err := topics.Balancer(topics.DefaultPartitioner) // cmd/producer's default
	if err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", Balancer: balancer, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	var batch []kafka.Message
	if _, err := backtest.Messages(context.Background(), src, backtest.MessageOptions{Keys: 30, LabelsDelay: 5}, func(m backtest.Message) error {
		batch = append(batch, kafka.Message{Key: m.Key, Value: m.Value})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessages(context.Background(), batch...); err != nil {
		t.Fatal(err)
	}
	return 0
}

// A keyed JSONL file: the key field spreads its events over their keys.
func TestKeyedJSONLBacktest(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 300; i++ {
		y := 1
		if i%3 == 0 {
			y = -1
		}
		ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute).Format(time.RFC3339)
		fmt.Fprintf(&b, `{"id":"e%d","cust":"c%d","ts":%q,"x":[%d,1],"label":%d}`+"\n", i, i%7, ts, y, y)
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var errb bytes.Buffer
	if code := run([]string{"backtest", "-keyed", "-data", path, "-dim", "2", "-key", "cust", "-learners", "perceptron", "-out", dir, "-q"},
		&bytes.Buffer{}, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	var reps []struct {
		Keys   int
		Totals struct{ Events, Labeled int }
	}
	if err := json.Unmarshal(raw, &reps); err != nil || len(reps) != 1 || reps[0].Keys != 7 || reps[0].Totals.Events != 300 || reps[0].Totals.Labeled != 300 {
		t.Fatalf("summary %s (%v)", raw, err)
	}
	// The events carry times: accuracy over event time, over every key.
	curve, err := os.ReadFile(filepath.Join(dir, "curve.csv"))
	if err != nil || !strings.HasPrefix(string(curve), "learner,labeled,cumulative_mistakes,window_accuracy,time\n") ||
		!strings.Contains(string(curve), "2026-11-01T04:59:00Z") {
		t.Fatalf("curve.csv: %v\n%.300s", err, curve)
	}
	if svg, err := os.ReadFile(filepath.Join(dir, "accuracy.svg")); err != nil || !bytes.Contains(svg, []byte("event time")) {
		t.Fatalf("accuracy.svg over event time: %v", err)
	}
}

// -labels-data replays a history kept as two JSONL files, the events and
// the labels that came later, merged by time as the service merges its two
// topics: the same labels inline in one file and late in another give the
// same counts, every label joined to its event; flags that do not apply
// are refused.
func TestKeyedTwoFilesBacktest(t *testing.T) {
	var events, labels strings.Builder
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 300; i++ {
		y := 1
		if i%3 == 0 {
			y = -1
		}
		ts := func(d time.Duration) string { return base.Add(time.Duration(i)*time.Minute + d).Format(time.RFC3339) }
		fmt.Fprintf(&events, `{"id":"e%d","cust":"c%d","ts":%q,"x":[%d,1]}`+"\n", i, i%7, ts(0), y)
		fmt.Fprintf(&labels, `{"id":"e%d","cust":"c%d","ts":%q,"label":%d}`+"\n", i, i%7, ts(90*time.Second), y)
	}
	dir := t.TempDir()
	ep, lp := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "labels.jsonl")
	os.WriteFile(ep, []byte(events.String()), 0o644)
	os.WriteFile(lp, []byte(labels.String()), 0o644)
	out := t.TempDir()
	var errb bytes.Buffer
	if code := run([]string{"backtest", "-keyed", "-data", ep, "-labels-data", lp, "-dim", "2", "-key", "cust", "-learners", "perceptron", "-partitions", "2", "-out", out, "-q"},
		&bytes.Buffer{}, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	raw, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	var reps []struct {
		Keys   int
		Totals struct{ Events, Labeled, DelayedLabeled, LabelsJoined int }
	}
	if err := json.Unmarshal(raw, &reps); err != nil || len(reps) != 1 || reps[0].Keys != 7 || reps[0].Totals.Events != 300 ||
		reps[0].Totals.Labeled != 300 || reps[0].Totals.DelayedLabeled != 300 || reps[0].Totals.LabelsJoined != 300 {
		t.Fatalf("summary %s (%v)", raw, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-keyed", "-data", ep, "-labels-data", lp, "-dim", "2", "-learners", "perceptron", "-out", out}, "-labels-data goes with a keyed JSONL -data file and its -key field"},
		{[]string{"-keyed", "-data", ep, "-labels-data", lp, "-dim", "2", "-key", "cust", "-labels-delay", "3", "-learners", "perceptron", "-out", out}, "not with -labels-delay or -keys"},
		{[]string{"-keyed", "-data", ep, "-labels-data", filepath.Join(dir, "missing.jsonl"), "-dim", "2", "-key", "cust", "-learners", "perceptron", "-out", out}, "missing.jsonl"},
	} {
		errb.Reset()
		if code := run(append([]string{"backtest"}, c.args...), &bytes.Buffer{}, &errb); code == exitOK || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, %s; want an error saying %q", c.args, code, errb.String(), c.want)
		}
	}
}

// -detectors scores drift detectors against a generator's known drift
// points and writes detection.json; a file without drift points is refused.
// (-alert-min-rise 0 scores the detectors' own tests: the perceptron gets
// over these switches within a recent window, a rise the service's default
// minimum would not alert.)
func TestBacktestScoresDetectors(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run([]string{"backtest", "-data", "synth:switching-gaussian?T=3000&d=5&period=1000", "-learners", "perceptron", "-alert-min-rise", "0",
		"-detectors", `[{"detector":"hddm-a","signal":"mistakes"},{"detector":"adwin","signal":"score"}]`, "-out", dir, "-q"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "detection.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Learner   string
		Detectors []struct {
			Name          string
			Drifts, Found int
		}
	}
	if err := json.Unmarshal(b, &rows); err != nil || len(rows) != 1 || len(rows[0].Detectors) != 2 {
		t.Fatalf("detection.json %s: %v", b, err)
	}
	if d := rows[0].Detectors[0]; d.Name != "hddm-a/mistakes" || d.Drifts != 2 || d.Found < 1 {
		t.Fatalf("hddm-a on mistakes: %+v", d)
	}
	if !strings.Contains(out.String(), "hddm-a/mistakes") {
		t.Fatalf("no detection table: %s", out.String())
	}
	// "all" pairs each detector with the signals it can watch (DDM and EDDM
	// with mistakes only), so every pair runs.
	if code := run([]string{"backtest", "-data", "synth:switching-gaussian?T=2000&d=5&period=1000", "-learners", "perceptron", "-detectors", "all", "-out", dir, "-q"},
		&bytes.Buffer{}, &errb); code != exitOK || !strings.Contains(readFile(t, filepath.Join(dir, "detection.json")), "eddm/mistakes") {
		t.Fatalf("-detectors all: exit %d: %s", code, errb.String())
	}
	if code := run([]string{"backtest", "-data", "synth:hyperplane?T=500", "-learners", "perceptron", "-detectors", "all", "-out", dir, "-q"},
		&bytes.Buffer{}, &bytes.Buffer{}); code != exitUsage {
		t.Fatalf("a stream without drift points: exit %d", code)
	}
}

// A keyed backtest runs the service's detectors (its defaults, or
// -detectors) per key with the service's cooldown, writes the alerts the
// service would have written (alerts-LEARNER.jsonl) and counts them per key:
// 20 keys whose labels fall to noise halfway each raise an alert after it.
func TestKeyedBacktestRunsTheServiceDetectors(t *testing.T) {
	dir := t.TempDir()
	exs, _ := detectionScenarios()[0].examples(20, 2000, 5)
	path := filepath.Join(dir, "keyed.jsonl")
	var b []byte
	for _, ex := range exs {
		x := ex.X.Dense()
		xs, _ := json.Marshal(x)
		b = fmt.Appendf(b, `{"key":%q,"id":%q,"x":%s,"label":%d}`+"\n", ex.Key, ex.ID, xs, ex.Label)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"backtest", "-keyed", "-data", path, "-key", "key", "-dim", "10", "-learners", "perceptron", "-out", dir, "-q"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dir, "alerts-perceptron.jsonl"))), "\n")
	keys := map[string]bool{}
	for _, l := range lines {
		var a struct {
			Key, ID, Detector, Signal string
			TS                        *string
		}
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("alert %q: %v", l, err)
		}
		if i, _ := strconv.Atoi(a.ID); i < 1000 || a.Detector != "adwin" || a.Signal != "mistakes" || a.TS != nil {
			t.Fatalf("alert %s: want adwin on mistakes after the key's 1,000th event, ts null", l)
		}
		keys[a.Key] = true
	}
	if len(keys) < 15 { // the benchmark: 20 of 20 within 1,000 events at 4,000 a key; here 1,000 after the fall
		t.Fatalf("%d of 20 keys alerted (%d alerts)", len(keys), len(lines))
	}
	csv := readFile(t, filepath.Join(dir, "keys.csv"))
	if !strings.HasPrefix(csv, "learner,key,partition,events,labeled,mistakes,queries,alerts,accuracy") {
		t.Fatalf("keys.csv header: %.80s", csv)
	}
	// -detectors [] turns them off; a flag of another kind of backtest is refused.
	if code := run([]string{"backtest", "-keyed", "-data", path, "-key", "key", "-dim", "10", "-learners", "perceptron", "-detectors", "[]", "-out", dir, "-q"},
		&bytes.Buffer{}, &errb); code != exitOK || strings.TrimSpace(readFile(t, filepath.Join(dir, "alerts-perceptron.jsonl"))) != "" {
		t.Fatalf("-detectors []: exit %d, alerts written", code)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A flag that the kind of backtest does not use is an error, never
// silently ignored.
func TestBacktestFlagsApplyToTheirMode(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		frag string
	}{
		{[]string{"-keyed", "-data", "synth:sea?T=100", "-learners", "perceptron", "-repeats", "2", "-out", dir}, "-repeats does not apply to a -keyed backtest"},
		{[]string{"-keyed", "-data", "synth:sea?T=100", "-learners", "perceptron", "-window", "5", "-out", dir}, "-window does not apply to a -keyed backtest"},
		{[]string{"-brokers", "127.0.0.1:1", "-topic", "events", "-dim", "2", "-keys", "3", "-learners", "perceptron", "-out", dir}, "-keys does not apply to a topic backtest"},
		{[]string{"-data", "synth:sea?T=100", "-learners", "perceptron", "-partitions", "3", "-out", dir}, "-partitions does not apply to a single-stream backtest"},
	} {
		var errb bytes.Buffer
		if code := run(append([]string{"backtest"}, tc.args...), &bytes.Buffer{}, &errb); code != exitUsage || !strings.Contains(errb.String(), tc.frag) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), exitUsage, tc.frag)
		}
	}
}

// An alert counts as on a key that got worse when, by the generator's truth,
// the key's last worseWindow events before it were at least worseBy more
// often wrong than its events since the previous alert; too few events
// before the window count as not.
func TestDetectionWorseUsesTheTruth(t *testing.T) {
	flat := make([]float64, 2000)
	rising := make([]float64, 2000)
	for i := range flat {
		flat[i], rising[i] = 0.2, 0.2
		if i >= 1000 {
			rising[i] = 0.2 + 2*worseBy
		}
	}
	for _, tc := range []struct {
		name   string
		alerts map[string][]int
		worse  int
	}{
		{"flat key", map[string][]int{"k": {1100}}, 0},
		{"risen by 2·worseBy, the window not all after the rise", map[string][]int{"r": {1100}}, 0},
		{"risen by 2·worseBy", map[string][]int{"r": {1300}}, 1},
		{"risen, but too early to tell", map[string][]int{"r": {400}}, 0},
		{"the window counts from the previous alert", map[string][]int{"r": {1300, 1900}}, 1},
		{"both keys", map[string][]int{"k": {1100}, "r": {1300}}, 1},
	} {
		alerts := map[string][]detectionAlert{}
		for k, as := range tc.alerts {
			for _, a := range as {
				alerts[k] = append(alerts[k], detectionAlert{at: a})
			}
		}
		run := detectionRun{alerts: alerts, expected: map[string][]float64{"k": flat, "r": rising}}
		if worse := run.markWorse(); worse != tc.worse {
			t.Errorf("%s: %d alerts on keys that got worse; want %d", tc.name, worse, tc.worse)
		}
	}
}

// The detection benchmark scores the service's detectors, as one set, on
// keyed streams with known drift points through the pipeline: no alert on
// improving keys, the rises found, one alert per change, every record
// showing its rise; a detector scored alone is a row of its own.
func TestDetectionCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"detection", "-keys", "8", "-events", "2000", "-q", "-out", dir}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var scores []detectionScore
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "detection.json"))), &scores); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range scores {
		if s.Config != "adwin/mistakes" {
			t.Fatalf("configuration %q, want the service's set as one", s.Config)
		}
		if s.Kind == "improving" && s.ImprovingAlerts != 0 {
			t.Errorf("%d alerts on %s", s.ImprovingAlerts, s.Scenario)
		}
		if s.ShowRise != s.Alerts || s.MaxPerChange > 1 {
			t.Errorf("%s: %d of %d records show the rise, up to %d alerts per change", s.Scenario, s.ShowRise, s.Alerts, s.MaxPerChange)
		}
		if s.Scenario == "rise 0.05→0.5 (noise)" {
			found = true
			if s.Detected < 7 {
				t.Errorf("found %d of 8 rises", s.Detected)
			}
			if s.MistakesBefore > 0.3 || s.MistakesAfter < 0.45 {
				t.Errorf("the learner's mistake rate went %.2f → %.2f, want about 0.2 → 0.5", s.MistakesBefore, s.MistakesAfter)
			}
		}
	}
	if !found || !strings.Contains(out.String(), "| adwin/mistakes |") {
		t.Fatalf("no score of the service's set: %s", out.String())
	}
	out.Reset()
	if code := run([]string{"detection", "-keys", "2", "-events", "400", "-q", "-detectors", `[{"detector":"ddm","signal":"mistakes"},{"detector":"adwin","signal":"score"}]`}, &out, &errb); code != exitOK ||
		!strings.Contains(out.String(), "| ddm/mistakes |") || !strings.Contains(out.String(), "| adwin/score |") {
		t.Fatalf("each detector alone: exit %d: %s%s", code, out.String(), errb.String())
	}
	// -service runs what ships: the service's learner (logreg), population model and intercept.
	out.Reset()
	if code := run([]string{"detection", "-keys", "2", "-events", "400", "-q", "-service", "-learner", "perceptron"}, &out, &errb); code != exitOK ||
		!strings.Contains(out.String(), "learner logreg,") || !strings.Contains(out.String(), "| adwin/mistakes |") {
		t.Fatalf("-service: exit %d: %s%s", code, out.String(), errb.String())
	}
}

// The population benchmark replays every event of each draw under the
// three variants and reports each bucket; a stream without keys is refused.
func TestPopulationCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"population", "-data", "synth:population?T=3000&keys=100", "-learners", "perceptron", "-seeds", "2", "-q", "-out", dir}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	table := readFile(t, filepath.Join(dir, "population.md"))
	for _, row := range []string{"| per-key |", "| global |", "| population |", "| gain |"} {
		if !strings.Contains(table, row) {
			t.Fatalf("no %q row:\n%s", row, table)
		}
	}
	if !regexp.MustCompile(`\| keys, events \| \d+, 3000 \|`).MatchString(table) {
		t.Fatalf("the first draw's 3,000 events are not all counted:\n%s", table)
	}
	if code := run([]string{"population", "-data", "synth:sea?T=300", "-seeds", "2", "-q"}, &bytes.Buffer{}, &errb); code != exitUsage || !strings.Contains(errb.String(), "keyed generator") {
		t.Fatalf("a stream without keys: exit %d, %s", code, errb.String())
	}
}

// Without -learners a keyed backtest runs the service's configuration, read
// from its DRIFTSTREAM_* environment (flags set on the command line win);
// -bias works on keyed JSONL (the learners get dimension 3 from 2-value
// "x"); the report gives accuracy by events per key.
func TestKeyedBacktestRunsTheServiceConfiguration(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 400; i++ {
		key := "big"
		if i%40 == 0 {
			key = fmt.Sprintf("small%d", i) // 10 keys of one event each
		}
		y := 1
		if i%3 == 0 {
			y = -1
		}
		fmt.Fprintf(&b, `{"id":"e%d","k":%q,"x":[%d,0.5],"label":%d}`+"\n", i, key, y, y)
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DRIFTSTREAM_LEARNER", "logreg")
	t.Setenv("DRIFTSTREAM_LEARNER_PARAMS", `{"eta":0.2}`)
	t.Setenv("DRIFTSTREAM_POPULATION", "additive")
	t.Setenv("DRIFTSTREAM_BIAS", "true")
	t.Setenv("DRIFTSTREAM_DETECTORS", "[]")
	t.Setenv("DRIFTSTREAM_SHARED_ACROSS_PARTITIONS", "true")
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"backtest", "-keyed", "-data", path, "-dim", "2", "-key", "k", "-out", dir, "-q"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), `no -learners: the service's configuration: learner logreg {"eta":0.2}, population additive, learn from all, shared across partitions true, bias true`) {
		t.Fatalf("stderr does not say what ran: %s", errb.String())
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	var reps []struct {
		Learner   string
		Params    json.RawMessage
		Keys      int
		Totals    struct{ Events, Labeled, Mistakes, FollowedPopulation int }
		ByKeySize []struct {
			Name     string
			Keys     int
			Labeled  int
			Mistakes int
			Accuracy *float64
		} `json:"by_key_size"`
	}
	if err := json.Unmarshal(raw, &reps); err != nil || len(reps) != 1 {
		t.Fatalf("summary %s (%v)", raw, err)
	}
	r := reps[0]
	var params struct{ Eta float64 }
	if err := json.Unmarshal(r.Params, &params); err != nil || r.Learner != "logreg" || params.Eta != 0.2 || r.Keys != 11 || r.Totals.Events != 400 || r.Totals.Labeled != 400 {
		t.Fatalf("report %+v", r)
	}
	if len(r.ByKeySize) != 4 || r.ByKeySize[0].Name != "1-10" || r.ByKeySize[0].Keys != 10 || r.ByKeySize[0].Labeled != 10 ||
		r.ByKeySize[2].Name != "101-1000" || r.ByKeySize[2].Keys != 1 || r.ByKeySize[2].Labeled != 390 ||
		r.ByKeySize[1].Keys != 0 || r.ByKeySize[1].Accuracy != nil || r.ByKeySize[3].Name != ">1000" ||
		r.ByKeySize[0].Mistakes+r.ByKeySize[2].Mistakes != r.Totals.Mistakes {
		t.Fatalf("by key size %+v", r.ByKeySize)
	}
	if !strings.Contains(out.String(), "by events per key:  1-10 ") {
		t.Fatalf("no line by key size: %s", out.String())
	}
	// A flag set on the command line wins over the service's setting.
	errb.Reset()
	if code := run([]string{"backtest", "-keyed", "-data", path, "-dim", "2", "-key", "k", "-population", "off", "-shared-across-partitions=false", "-out", dir, "-q"}, &out, &errb); code != exitOK ||
		!strings.Contains(errb.String(), "population off,") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	// -params belongs to -learners.
	if code := run([]string{"backtest", "-keyed", "-data", path, "-dim", "2", "-key", "k", "-params", "{}", "-out", dir, "-q"}, &out, &errb); code != exitUsage {
		t.Fatalf("-params without -learners: exit %d", code)
	}
}
