package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// restoreLine is a "partition restored" log line's figures.
type restoreLine struct {
	Partition        int    `json:"partition"`
	From             string `json:"from"`
	ChangelogRecords int    `json:"changelog_records"`
	RestoreMS        int64  `json:"restore_ms"`
	// ReplayFrom is where the partition reads its events topic from: before
	// Committed by the records re-read for awaited inputs.
	ReplayFrom int64 `json:"replay_from"`
	Committed  int64 `json:"committed"`
}

// restores are p's "partition restored" lines.
func (p *proc) restores(t *testing.T) []restoreLine {
	t.Helper()
	return restoresIn(t, p.log)
}

// restoresIn are the "partition restored" lines of a consumer's JSON log.
func restoresIn(t testing.TB, log string) []restoreLine {
	t.Helper()
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []restoreLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `"partition restored"`) {
			continue
		}
		var r restoreLine
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// endOffsets sums the end offsets of topic's partitions: every record ever
// written to it, compacted or not.
func endOffsets(t testing.TB, addr, topic string, partitions int) int64 {
	t.Helper()
	var sum int64
	for p := range partitions {
		conn, err := kafka.DialLeader(context.Background(), "tcp", addr, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		end, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		sum += end
	}
	return sum
}

// Consumers killed with SIGKILL every few seconds while events arrive:
// each restore reads the changelog from its start, so restores stay flat
// only if the changelog is compacted as it grows. The changelog exists
// before the first consumer with the service's compaction settings but
// segments of 1 MiB (the least Kafka 4 takes), so that segments close
// within the test's minute as the service's 64 MiB ones close within
// a deployment's hours; the load writes about 20 times the live state.
// After the last kill, a restore reads at most a third of what was ever
// written (an uncompacted changelog: all of it, and more each kill), and
// no more than the first restore read; the state is exactly once
// throughout. On the in-process broker (which compacts every second here)
// and, with DRIFTSTREAM_KAFKA_ADDR, on a real one (scripts/integration.sh).
func TestBlackBoxRestoresStayFlatUnderKills(t *testing.T) {
	b := newBlackBox(t, kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": "1000"}))
	segmentBytes := "1048576"
	if s := os.Getenv("DRIFTSTREAM_TEST_CHANGELOG_SEGMENT_BYTES"); s != "" { // to see the test fail: 1073741824 (the broker's default)
		segmentBytes = s
	}
	kafkatest.CreateTopic(t, b.addr, kafka.TopicConfig{Topic: b.topic("changelog"), NumPartitions: blackBoxPartitions, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}, {ConfigName: "segment.bytes", ConfigValue: segmentBytes},
			{ConfigName: "segment.ms", ConfigValue: "600000"}, {ConfigName: "min.cleanable.dirty.ratio", ConfigValue: "0.25"}}})
	const keys, rate, kills = 2000, 3000, 4
	prod := startProducer(t, b.addr, b.topic("events"), keys, rate*60, rate)
	var reads []int // changelog records the restores of each process read, summed over partitions
	var ms []int64
	for i := range kills {
		p := b.start()
		waitFor(t, 60*time.Second, "every partition restored", func() bool { return len(p.restores(t)) >= blackBoxPartitions })
		n, slowest := 0, int64(0)
		for _, r := range p.restores(t) {
			n += r.ChangelogRecords
			slowest = max(slowest, r.RestoreMS)
		}
		reads, ms = append(reads, n), append(ms, slowest)
		time.Sleep(12 * time.Second)
		p.kill(t)
		t.Logf("kill %d: the restore read %d changelog records (slowest partition %d ms); %d written so far", i+1, n, slowest, endOffsets(t, b.addr, b.topic("changelog"), blackBoxPartitions))
	}
	ids := prod.finish(t)
	last := b.start()
	waitFor(t, 60*time.Second, "every partition restored", func() bool { return len(last.restores(t)) >= blackBoxPartitions })
	final := 0
	for _, r := range last.restores(t) {
		final += r.ChangelogRecords
	}
	written := endOffsets(t, b.addr, b.topic("changelog"), blackBoxPartitions)
	t.Logf("restores read %v changelog records (slowest partition, ms: %v), then %d; %d written in all", reads, ms, final, written)
	if reads[1] == 0 || written < int64(10*keys) {
		t.Fatalf("restores read %v of %d written: the load did not happen", reads, written)
	}
	if int64(final)*3 > written || final > 2*max(reads[0], reads[1]) {
		t.Fatalf("the last restore read %d changelog records of %d written (the first two: %v): the changelog is not compacted as it grows; restores grow with its history", final, written, reads[:2])
	}
	last.kill(t)
	b.finishWith(ids)
	b.verify(ids)
}
