package main

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
)

// The changelog leaves out the inputs of events awaiting their labels, so a
// restore reads them again from the events topic. When retention deleted
// some of those records between a stop and the restart, exactly their
// labels teach nothing: they are joined and scored, and counted in
// driftstream_label_inputs_lost_total; the log says records were deleted;
// every other label is joined to an input read again. With
// DRIFTSTREAM_AWAITED_INPUTS=changelog the key records hold the inputs, and
// none is lost.
func TestBlackBoxRetentionTakesAwaitedInputsWithIt(t *testing.T) {
	for _, tc := range []struct {
		awaited string
		loses   bool
	}{{"events", true}, {"changelog", false}} {
		t.Run(tc.awaited, func(t *testing.T) {
			b := newBlackBox(t)
			b.args = append(b.args, "-awaited-inputs", tc.awaited)
			const n = 400
			var evs, lbs []kafka.Message
			var ids []string
			for i := range n {
				key := []byte(fmt.Sprintf("k%d", i%20))
				id := fmt.Sprintf("e%d", i)
				ids = append(ids, id)
				evs = append(evs, kafka.Message{Key: key, Value: fmt.Appendf(nil, `{"id":%q,"x":[%d,1,-1,0.5,0,%d]}`, id, i%5-2, i%3-1)})
				lbs = append(lbs, kafka.Message{Key: key, Value: fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, 1-2*(i%2))})
			}
			b.runToEnd(evs, ids)

			// Retention deletes the first half of each partition, every
			// record of it an event awaiting its label.
			deleted := 0
			for p, msgs := range readTopic(t, b.addr, b.topic("events")) {
				if len(msgs) < 2 {
					continue
				}
				cut := msgs[len(msgs)/2].Offset
				kafkatest.DeleteRecords(t, b.addr, b.topic("events"), int32(p), cut)
				deleted += int(cut)
			}
			if deleted == 0 {
				t.Fatal("no record deleted: the test proves nothing")
			}
			kafkatest.Write(t, b.addr, b.topic("events"), lbs)

			metricsAddr := freeAddr(t)
			b.args = append(b.args, "-metrics-addr", metricsAddr)
			second := b.start()
			waitFor(t, 60*time.Second, "every label joined", func() bool { return metric(metricsAddr, "driftstream_labels_joined_total") == n })
			want := 0
			if tc.loses {
				want = deleted
			}
			if got := metric(metricsAddr, "driftstream_label_inputs_lost_total"); got != want {
				t.Fatalf("%d inputs lost, want %d (%d records deleted by retention)", got, want, deleted)
			}
			t.Logf("%d labels joined, %d inputs lost of the %d events retention deleted", n, want, deleted)
			if tc.loses && second.count("records were deleted by retention") == 0 {
				t.Fatal("the restart did not log the records retention deleted")
			}
			second.signal(t, syscall.SIGTERM)
			second.waitClean(t)
		})
	}
}

// metric is the value of an unlabelled counter on the metrics server at
// addr, or −1 when it cannot be read.
func metric(addr, name string) int {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return int(f)
		}
	}
	return -1
}
