package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/poll"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

var updateFingerprint = flag.Bool("update-fingerprint", false, "rewrite testdata/fingerprint.golden from this build")

// TestFingerprint runs one fixed keyed stream (labels inline and delayed,
// malformed records, a concept that flips and then turns to noise) through
// the service three ways, and compares a hash of every output topic and of
// the changelog's final key states with testdata/fingerprint.golden: a
// change of behaviour — of any prediction, query, dead letter, alert or key
// state, byte for byte — fails it, and a change meant to alter behaviour
// rewrites the file (go test ./service -run TestFingerprint
// -update-fingerprint) and says why in its commit. The input is written one
// partition at a time over one connection each, so that its order is the
// same in every run.
func TestFingerprint(t *testing.T) {
	var got bytes.Buffer
	for _, run := range []struct{ learner, params, pop string }{{"lasec-ss", `{"a":0.3}`, "off"}, {"lasec-ss", `{"a":0.3}`, "lasec-ss"}, {"perceptron", `{}`, "off"}, {"logreg", `{}`, "additive"}} {
		pop := "learner=" + run.learner + " population=" + run.pop
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(-1))
		if err != nil {
			t.Fatal(err)
		}
		addr := c.ListenAddrs()[0]
		vec, _ := topics.NewVectorizer(5, 0)
		tp := Topics{Events: "events", Labels: "labels", Predictions: "predictions", Queries: "label-queries", DeadLetters: "dead-letters", Alerts: "alerts", Changelog: "changelog"}
		cfg := Config{Brokers: []string{addr}, Group: "fp", Partitions: 3, Replication: 1, Topics: tp,
			Pipeline: pipeline.Config{
				Settings: keyed.Settings{Learner: run.learner, Params: json.RawMessage(run.params), Seed: 7, Vector: vec, MaxPending: 1000, PendingTTL: 100000, Population: run.pop, Detectors: []keyed.DetectorSpec{{Detector: "adwin", Signal: "mistakes"}}}},
			CheckpointEvery: 250, CheckpointPeriod: time.Hour}
		ctx, cancel := context.WithCancel(context.Background())
		s, err := New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		n := fingerprintInput(t, addr)
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		// Every event in, every label joined.
		poll.Until(t, 60*time.Second, func() bool { tot := s.Totals(); return tot.Events >= int64(n) && tot.Labeled >= int64(n) },
			func() string { return fmt.Sprintf("%s: %d events and their labels: %+v", pop, n, s.Totals()) })
		tot := s.Totals()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&got, "%s totals events=%d predictions=%d queries=%d labeled=%d mistakes=%d joined=%d dead=%d\n", pop, tot.Events, tot.Predictions, tot.Queries, tot.Labeled, tot.Mistakes, tot.LabelsJoined, tot.DeadLetters)
		for _, topic := range []string{"events", "predictions", "label-queries", "dead-letters", "alerts"} {
			h := sha256.New()
			count := 0
			for p := 0; p < 3; p++ {
				for _, m := range readPartition(t, addr, topic, p) {
					count++
					fmt.Fprintf(h, "%d|%q|%q|", p, m.Key, m.Value)
					var hs []string
					for _, x := range m.Headers {
						hs = append(hs, x.Key+"="+string(x.Value))
					}
					sort.Strings(hs)
					fmt.Fprintf(h, "%q\n", hs)
				}
			}
			fmt.Fprintf(&got, "%s %s records=%d sha256=%x\n", pop, topic, count, h.Sum(nil)[:12])
		}
		last := map[string][]byte{}
		for p := 0; p < 3; p++ {
			for _, m := range readPartition(t, addr, "changelog", p) {
				if strings.HasPrefix(string(m.Key), "\x00driftstream-owner") {
					continue // names this process (host/pid)
				}
				last[fmt.Sprintf("%d/%q", p, m.Key)] = m.Value
			}
		}
		keys := make([]string, 0, len(last))
		for k := range last {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		h := sha256.New()
		for _, k := range keys {
			fmt.Fprintf(h, "%s=%x\n", k, last[k])
		}
		fmt.Fprintf(&got, "%s changelog final records=%d sha256=%x\n", pop, len(keys), h.Sum(nil)[:12])
		c.Close()
	}
	golden := filepath.Join("testdata", "fingerprint.golden")
	if *updateFingerprint {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("the service's outputs or key states changed:\ngot\n%s\nwant (%s)\n%s", got.Bytes(), golden, want)
	}
}

// fingerprintInput writes the fingerprint's records to the events topic and
// returns the number of events among them.
func fingerprintInput(t *testing.T, addr string) int {
	r := rand.New(rand.NewPCG(11, 12))
	var msgs, labels []kafka.Message
	n := 6000
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("k%d", int(float64(40)*r.Float64()*r.Float64()))
		x := make([]float64, 5)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		w0 := 1.0
		if i > n/2 {
			w0 = -1
		}
		flip := (i/1500)%2 == 1
		y := 1
		m := w0*x[0] + 0.5*x[1] - 0.3*x[2]
		if i >= 4500 { // the labels become noise: mistakes rise to one half
			m = r.NormFloat64()
		}
		if m < 0 {
			y = -1
		}
		if r.Float64() < 0.1 != flip {
			y = -y
		}
		xs, _ := json.Marshal(x)
		id := fmt.Sprintf("e%d", i)
		switch {
		case i%3 == 0:
			msgs = append(msgs, kafka.Message{Key: []byte(key), Value: []byte(fmt.Sprintf(`{"id":%q,"x":%s}`, id, xs))})
			labels = append(labels, kafka.Message{Key: []byte(key), Value: []byte(fmt.Sprintf(`{"id":%q,"label":%d}`, id, y))})
			if len(labels) > 30 { // the label of an event 90 events back, on the same topic
				msgs, labels = append(msgs, labels[0]), labels[1:]
			}
		default:
			msgs = append(msgs, kafka.Message{Key: []byte(key), Value: []byte(fmt.Sprintf(`{"id":%q,"x":%s,"label":%d}`, id, xs, y))})
		}
		if i%500 == 250 {
			msgs = append(msgs, kafka.Message{Key: []byte(key), Value: []byte(`{"id":"bad","x":[1,2`)})
			n++
		}
	}
	// One connection per partition, in order: a kafka.Writer with its
	// default acks (none) gave one partition's records in different orders
	// in two runs.
	per := map[int][]kafka.Message{}
	for _, m := range append(msgs, labels...) {
		p := kafka.Murmur2Balancer{}.Balance(m, 0, 1, 2)
		per[p] = append(per[p], kafka.Message{Key: m.Key, Value: m.Value})
	}
	for p, ms := range per {
		conn, err := kafka.DialLeader(context.Background(), "tcp", addr, "events", p)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(ms); i += 500 {
			if _, err := conn.WriteMessages(ms[i:min(i+500, len(ms))]...); err != nil {
				t.Fatal(err)
			}
		}
		conn.Close()
	}
	return n
}

// readPartition reads a partition of topic whole.
func readPartition(t *testing.T, addr, topic string, p int) []kafka.Message {
	t.Helper()
	conn, err := kafka.DialLeader(context.Background(), "tcp", addr, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	first, end, err := conn.ReadOffsets()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Seek(first, kafka.SeekAbsolute); err != nil {
		t.Fatal(err)
	}
	var out []kafka.Message
	for off := first; off < end; {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := conn.ReadBatch(1, 10<<20)
		for {
			m, err := b.ReadMessage()
			if err != nil {
				break
			}
			out = append(out, m)
			off = m.Offset + 1
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
