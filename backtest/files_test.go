package backtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/streams"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// twoFileHistory writes a keyed history as two JSONL files, events and the
// labels that came later, each line with its key and time: labels 20 ms
// before their event (early) to 400 ms after, some inline, some never;
// one event in twenty stamped up to 50 ms before the one before it (a
// producer clock going back), the labels file in time order but for a
// few neighbours swapped; times with sub-millisecond parts. It returns the
// paths and the records as a producer that stamps each with its time
// would write them to an events and a labels topic.
func twoFileHistory(t *testing.T, n, keys int) (eventsPath, labelsPath string, events, labels []kafka.Message) {
	t.Helper()
	r := rand.New(rand.NewPCG(47, 1))
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var ev, lb strings.Builder
	type label struct {
		key, line string
		at        time.Time
	}
	var lbs []label
	at := base
	for i := range n {
		key := fmt.Sprintf("k%d", r.IntN(keys))
		at = at.Add(time.Duration(10_000+r.IntN(1_000)) * time.Microsecond)
		ts := at
		if r.IntN(20) == 0 {
			ts = at.Add(-time.Duration(r.IntN(50_000)) * time.Microsecond)
		}
		x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		y := 1
		if x[0]-x[1]+0.5*x[2] < 0 {
			y = -1
		}
		xs, _ := json.Marshal(x)
		line := fmt.Sprintf(`{"key":%q,"id":"e%d","x":%s,"ts":%q`, key, i, xs, ts.Format(time.RFC3339Nano))
		switch u := r.IntN(10); {
		case u == 0: // inline
			line += fmt.Sprintf(`,"label":%d`, y)
		case u == 1: // never
		default:
			lt := ts.Add(time.Duration(r.IntN(420_000)-20_000) * time.Microsecond)
			lbs = append(lbs, label{key, fmt.Sprintf(`{"key":%q,"id":"e%d","label":%d,"ts":%q}`, key, i, y, lt.Format(time.RFC3339Nano)), lt})
		}
		ev.WriteString(line + "}\n")
		events = append(events, kafka.Message{Key: []byte(key), Time: ts, Value: []byte(strings.Replace(line, fmt.Sprintf(`"key":%q,`, key), "", 1) + "}")})
	}
	slices.SortStableFunc(lbs, func(a, b label) int { return a.at.Compare(b.at) })
	for i := 1; i+1 < len(lbs); i += 37 {
		lbs[i], lbs[i+1] = lbs[i+1], lbs[i]
	}
	for _, l := range lbs {
		lb.WriteString(l.line + "\n")
		labels = append(labels, kafka.Message{Key: []byte(l.key), Time: l.at, Value: []byte(strings.Replace(l.line, fmt.Sprintf(`"key":%q,`, l.key), "", 1))})
	}
	dir := t.TempDir()
	eventsPath, labelsPath = filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "labels.jsonl")
	if err := os.WriteFile(eventsPath, []byte(ev.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(labelsPath, []byte(lb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return eventsPath, labelsPath, events, labels
}

// A keyed history kept as two files, events and the labels that came
// later, replayed by FromFiles, predicts what the service predicts, id by
// id and byte for byte, once the same records are on an events and a
// labels topic with their times as record timestamps — and so does a
// backtest of the two topics: early labels, clocks going back, times finer
// than Kafka's milliseconds and labels that never come included.
func TestTwoFilesPredictWhatTheServiceDoes(t *testing.T) {
	const n, keys = 3000, 40
	eventsPath, labelsPath, events, labels := twoFileHistory(t, n, keys)
	c := kafkatest.Cluster(t, kfake.SeedTopics(partitions, "events", "labels"))
	addr := c.ListenAddrs()[0]
	kafkatest.Write(t, addr, "events", events)
	kafkatest.Write(t, addr, "labels", labels)
	pcfg := pipelineConfig(t, "perceptron", "")
	files := TwoFiles{
		Events: func() (streams.Source, error) {
			return streams.OpenJSONL(eventsPath, streams.JSONLOptions{Dim: 4, KeyField: "key"})
		},
		Labels: func() (streams.Source, error) {
			return streams.OpenJSONL(labelsPath, streams.JSONLOptions{Dim: 4, KeyField: "key"})
		},
	}
	fromFiles, err := FromFiles(files, MessageOptions{}, partitions)
	if err != nil {
		t.Fatal(err)
	}
	fileCol := &collector{preds: map[string][]byte{}}
	rep, err := Replay(context.Background(), ReplayConfig{Name: "files", Pipeline: pcfg, Outputs: fileCol.outputs}, fromFiles)
	if err != nil {
		t.Fatal(err)
	}
	if err := fromFiles.Err(); err != nil {
		t.Fatal(err)
	}
	tot := rep.Totals
	if tot.Events != n || tot.DelayedLabeled < 2000 || tot.Labeled < 2500 {
		t.Fatalf("the files' backtest: %+v", tot)
	}
	served, st := serve(t, addr, pcfg, "labels", n, int(tot.Labeled))
	fromTopic, err := FromTopic(context.Background(), TopicRange{Brokers: []string{addr}, Topic: "events", LabelsTopic: "labels", From: Unbounded, To: Unbounded})
	if err != nil {
		t.Fatal(err)
	}
	topicCol := &collector{preds: map[string][]byte{}}
	if _, err := Replay(context.Background(), ReplayConfig{Name: "topics", Pipeline: pcfg, Outputs: topicCol.outputs}, fromTopic); err != nil {
		t.Fatal(err)
	}
	for name, col := range map[string]*collector{"files": fileCol, "topics": topicCol} {
		differ := 0
		for id, want := range served {
			if !bytes.Equal(col.preds[id], want) {
				if differ++; differ <= 3 {
					t.Logf("%s: backtest of the %s %s\nservice %s", id, name, col.preds[id], want)
				}
			}
		}
		if len(col.preds) != n || differ != 0 {
			t.Fatalf("backtest of the %s: %d predictions, %d differ from the service's %d", name, len(col.preds), differ, len(served))
		}
	}
	if st.Labeled != tot.Labeled || st.Mistakes != tot.Mistakes || st.LabelsJoined != tot.LabelsJoined {
		t.Fatalf("service totals %+v, the files' backtest %+v", st, tot)
	}
	t.Logf("%d events, %d labeled (%d delayed): the files' backtest, the topics' and the service agree on every prediction", n, tot.Labeled, tot.DelayedLabeled)
}

// Every line of both files needs its key and its time, and each file holds
// its own kind of record: a mistake fails the backtest with the file and
// record named.
func TestTwoFilesRefuseLinesTheMergeCannotPlace(t *testing.T) {
	for _, c := range []struct{ name, events, labels, want string }{
		{"no ts", `{"key":"a","id":"1","x":[1,2,3,4]}`, `{"key":"a","id":"1","label":1,"ts":"2026-11-28T00:00:00Z"}`, `events file, record 1 (id "1"): no "ts"`},
		{"label without ts", `{"key":"a","id":"1","x":[1,2,3,4],"ts":"2026-11-28T00:00:00Z"}`, `{"key":"a","id":"1","label":1}`, `labels file, record 1 (id "1"): no "ts"`},
		{"event in the labels file", `{"key":"a","id":"1","x":[1,2,3,4],"ts":"2026-11-28T00:00:00Z"}`, `{"key":"a","id":"2","x":[1,2,3,4],"ts":"2026-11-28T00:00:00Z"}`, `labels file, record 1 (id "2"): a label record belongs in the labels file`},
		{"no key", `{"id":"1","x":[1,2,3,4],"ts":"2026-11-28T00:00:00Z"}`, `{"key":"a","id":"1","label":1,"ts":"2026-11-28T00:00:00Z"}`, `no key`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ep, lp := filepath.Join(dir, "e.jsonl"), filepath.Join(dir, "l.jsonl")
			os.WriteFile(ep, []byte(c.events+"\n"), 0o644)
			os.WriteFile(lp, []byte(c.labels+"\n"), 0o644)
			files := TwoFiles{
				Events: func() (streams.Source, error) {
					return streams.OpenJSONL(ep, streams.JSONLOptions{Dim: 4, KeyField: "key"})
				},
				Labels: func() (streams.Source, error) {
					return streams.OpenJSONL(lp, streams.JSONLOptions{Dim: 4, KeyField: "key"})
				},
			}
			in, err := FromFiles(files, MessageOptions{}, 1)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Replay(context.Background(), ReplayConfig{Name: "bad", Pipeline: pipelineConfig(t, "perceptron", "")}, in)
			if err == nil {
				err = in.Err()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}
