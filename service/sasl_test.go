package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/config"
	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The service works against a broker that requires SASL, with credentials
// from configuration, and a wrong password fails fast with a clear error.
func TestSASL(t *testing.T) {
	for _, mech := range []struct{ kfake, ours string }{{"SCRAM-SHA-256", "scram-sha-256"}, {"PLAIN", "plain"}} {
		t.Run(mech.ours, func(t *testing.T) {
			c := kafkatest.Cluster(t, kfake.EnableSASL(), kfake.Superuser(mech.kfake, "admin", "s3cret"))
			addr := c.ListenAddrs()[0]
			good := config.Config{SASLMechanism: mech.ours, SASLUsername: "admin", SASLPassword: "s3cret"}
			dialer, transport, err := good.Kafka()
			if err != nil {
				t.Fatal(err)
			}
			cfg := config_(t, addr, "g-sasl", dialer, transport)
			if _, err := New(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, Transport: transport, RequiredAcks: kafka.RequireAll}
			if err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte("k"), Value: []byte(`{"id":"a","x":[1,2,3],"label":1}`)},
				kafka.Message{Key: []byte("k"), Value: []byte(`{"id":"b","x":[1,0,3]}`)}); err != nil {
				t.Fatal(err)
			}
			w.Close()
			runUntil(t, cfg, 2)

			bad := config.Config{SASLMechanism: mech.ours, SASLUsername: "admin", SASLPassword: "wrong"}
			bd, bt, _ := bad.Kafka()
			start := time.Now()
			_, err = New(context.Background(), config_(t, addr, "g-sasl-bad", bd, bt))
			if err == nil {
				t.Fatal("a wrong password was accepted")
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("failing took %s", took)
			}
			if msg := strings.ToLower(err.Error()); !strings.Contains(msg, "sasl") && !strings.Contains(msg, "authentication") {
				t.Fatalf("unclear error: %v", err)
			}
			if strings.Contains(err.Error(), "wrong") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// config_ is config() with the given dialer and transport.
func config_(t *testing.T, addr, group string, d *kafka.Dialer, tr *kafka.Transport) Config {
	cfg := testConfig(t, addr, group)
	cfg.Dialer, cfg.Transport = d, tr
	return cfg
}
