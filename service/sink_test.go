package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// An output the broker refuses for itself is replaced by a dead letter that
// names it, cut to fit, and the others are written: with the default policy
// the flush succeeds and the refusal is counted once; with "fail" the flush
// fails with a permanent error, so the partition fails as before.
func TestSinkDeadLettersARefusedOutput(t *testing.T) {
	for _, policy := range []string{OnOutputErrorDeadLetter, OnOutputErrorFail} {
		t.Run(policy, func(t *testing.T) {
			c := kafkatest.Cluster(t, kfake.SeedTopics(partitions, "predictions", "dead-letters"))
			addr := c.ListenAddrs()[0]
			cfg := Config{Brokers: []string{addr}, OnOutputError: policy,
				Topics: Topics{Events: "events", Predictions: "predictions", DeadLetters: "dead-letters"}}
			refused := map[string]int{}
			sink := newKafkaSink(cfg, func(kind, reason string) { refused[kind+"/"+reason]++ })
			defer sink.Close()
			var outs []pipeline.Output
			for i := range 50 {
				v := fmt.Appendf(nil, `{"id":"e%d"}`, i)
				if i == 17 { // over the topic's 1 MB limit (the service's own outputs cannot be; a broker with a lower limit than described can refuse any)
					v = bytes.Repeat([]byte{'x'}, 1_100_000)
				}
				outs = append(outs, pipeline.Output{Kind: pipeline.OutPrediction, Key: fmt.Appendf(nil, "k%d", i%7), Value: v,
					Source: pipeline.Position{Topic: pipeline.EventsTopic, Partition: 2, Offset: int64(1000 + i)}})
			}
			err := sink.Write(context.Background(), outs)
			if policy == OnOutputErrorFail {
				if !errors.Is(err, kafka.MessageSizeTooLarge) || pipeline.IsRetriable(err) || len(refused) != 0 {
					t.Fatalf("error %v, %d refusals counted: want a permanent MessageSizeTooLarge", err, len(refused))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			preds, dead := readAll(t, addr, "predictions"), readAll(t, addr, "dead-letters")
			if len(preds) != 49 || len(dead) != 1 || refused["prediction/output_too_large"] != 1 || len(refused) != 1 {
				t.Fatalf("%d predictions, %d dead letters, refusals %v: want 49, 1 and one output_too_large", len(preds), len(dead), refused)
			}
			h := map[string]string{}
			for _, x := range dead[0].Headers {
				h[x.Key] = string(x.Value)
			}
			if h["reason"] != pipeline.ReasonOutputTooLarge || h["output-kind"] != pipeline.OutPrediction || h["output-topic"] != "predictions" ||
				h["source-topic"] != "events" || h["partition"] != "2" || h["offset"] != "1017" || h["original-value-bytes"] != "1100000" ||
				len(dead[0].Value) != pipeline.MaxDeadLetterBytes || string(dead[0].Key) != "k3" {
				t.Fatalf("dead letter of %d bytes, key %q, headers %v", len(dead[0].Value), dead[0].Key, h)
			}
		})
	}
}

// New reads each output topic's max.message.bytes (else the broker's
// message.max.bytes) and refuses a configuration whose own records could
// exceed one, with the figures; within the limits it sizes the dead letters
// to the dead-letter topic's.
func TestNewSizesOutputsToTheTopicsLimits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []kfake.Opt
		configs map[string]string // topic → max.message.bytes set at creation
		frag    string            // "" : accepted
		dead    int               // the dead-letter limit New found
	}{
		{"defaults", nil, nil, "", pipeline.DefaultMaxMessageBytes},
		{"broker limit", []kfake.Opt{kfake.BrokerConfigs(map[string]string{"message.max.bytes": "200000"})}, nil, "", 200000},
		{"broker limit under the key records", []kfake.Opt{kfake.BrokerConfigs(map[string]string{"message.max.bytes": "800000"})}, nil,
			"changelog topic changelog's limit of 800000", 0},
		{"dead-letter topic", nil, map[string]string{"dead-letters": "100000"}, "", 100000},
		{"predictions too small", nil, map[string]string{"predictions": "16384"}, "a prediction output", 0},
		{"changelog too small", nil, map[string]string{"changelog": "500000"}, "changelog topic changelog's limit of 500000", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafkatest.Cluster(t, append([]kfake.Opt{kfake.SeedTopics(-1)}, tc.opts...)...)
			addr := c.ListenAddrs()[0]
			conn, err := kafka.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			for topic, limit := range tc.configs {
				tcfg := kafka.TopicConfig{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1,
					ConfigEntries: []kafka.ConfigEntry{{ConfigName: "max.message.bytes", ConfigValue: limit}}}
				if topic == "changelog" {
					tcfg.ConfigEntries = append(tcfg.ConfigEntries, kafka.ConfigEntry{ConfigName: "cleanup.policy", ConfigValue: "compact"})
				}
				if err := conn.CreateTopics(tcfg); err != nil {
					t.Fatal(err)
				}
			}
			conn.Close()
			cfg := testConfig(t, addr, "limits")
			if tc.dead == 200000 {
				cfg.Pipeline.MaxKeyBytes = 150_000 // within the changelog's limit too
			}
			s, err := New(context.Background(), cfg)
			if tc.frag != "" {
				if err == nil || !errors.Is(err, pipeline.ErrTooLarge) || !bytes.Contains([]byte(err.Error()), []byte(tc.frag)) {
					t.Fatalf("New: %v, want a refusal naming %q", err, tc.frag)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.cfg.Pipeline.Outputs.Of(pipeline.OutDeadLetter); got != tc.dead {
				t.Fatalf("dead-letter limit %d, want %d", got, tc.dead)
			}
		})
	}
}

// Ready means "in a generation, every assigned partition restored and
// running": a member that has not joined its group yet (a restarted pod
// while the group still waits for its former session) is not ready, and
// once it is, it runs every partition it was given.
func TestReadyOnlyWhenAssignedPartitionsRun(t *testing.T) {
	addr := cluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := New(ctx, testConfig(t, addr, "g-ready"))
	if err != nil {
		t.Fatal(err)
	}
	if ok, reason := s.Ready(); ok || !bytes.Contains([]byte(reason), []byte("joining consumer group g-ready")) {
		t.Fatalf("ready before joining: %v %q", ok, reason)
	}
	produce(t, addr, 1, 300)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	eventually(t, 60*time.Second, func() bool { ok, _ := s.Ready(); return ok }, func() string { _, r := s.Ready(); return r })
	if n := s.Assigned(); n != partitions {
		t.Fatalf("ready with %d of %d partitions running", n, partitions)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
