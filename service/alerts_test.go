package service

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/driftstream/driftstream/keyed"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// A key whose concept changes raises a drift alert on the alerts topic, keyed
// by the key, and the alert metric moves.
func TestDriftAlertsReachTheAlertsTopic(t *testing.T) {
	addr := cluster(t)
	cfg := testConfig(t, addr, "g-alerts")
	cfg.Topics.Alerts = "drift-alerts"
	cfg.Pipeline.Learner, cfg.Pipeline.Params = "perceptron", nil
	cfg.Pipeline.Detectors = []keyed.DetectorSpec{{Detector: "adwin", Signal: keyed.SignalMistakes}}
	reg := prometheus.NewRegistry()
	var err error
	if cfg.Metrics, err = NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", Balancer: kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	r := rand.New(rand.NewPCG(21, 1))
	var msgs []kafka.Message
	for i := 0; i < 3000; i++ {
		x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		m := x[0] - x[1]
		if i >= 1500 { // the key's labels become noise: its mistake rate jumps to one half
			m = r.NormFloat64()
		}
		y := 1
		if m < 0 {
			y = -1
		}
		xs, _ := json.Marshal(x)
		msgs = append(msgs, kafka.Message{Key: []byte("flipper"), Value: fmt.Appendf(nil, `{"id":"e%d","x":%s,"label":%d}`, i, xs, y)})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	tot := runUntil(t, cfg, 3000)
	alerts := readAll(t, addr, "drift-alerts")
	if len(alerts) == 0 {
		t.Fatalf("no drift alert on the alerts topic; totals %+v", tot)
	}
	t.Logf("totals %+v, %d alerts, the first: %s %s", tot, len(alerts), alerts[0].Key, alerts[0].Value)
	var a struct {
		Key, Detector, Signal string
		Offset                int64
	}
	json.Unmarshal(alerts[0].Value, &a)
	if string(alerts[0].Key) != "flipper" || a.Key != "flipper" || a.Detector != "adwin" || a.Signal != "mistakes" || a.Offset < 1500 {
		t.Fatalf("alert %s (record key %q)", alerts[0].Value, alerts[0].Key)
	}
	if got := sample(t, reg, "driftstream_drift_alerts_total", "detector", "adwin", "signal", "mistakes"); got != float64(len(alerts)) {
		t.Fatalf("drift_alerts_total %v, %d alerts on the topic", got, len(alerts))
	}
}
