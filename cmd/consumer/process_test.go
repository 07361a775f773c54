package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/config"
	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/driftstream/driftstream/internal/poll"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const blackBoxPartitions = 3

// blackBox is the consumer binary run as separate processes against a
// broker listening on TCP, driven only by signals: what a user can do to it.
// The broker is the in-process one, or a real Kafka broker when
// DRIFTSTREAM_KAFKA_ADDR names one (scripts/kafka-broker.sh starts it; the
// same tests then run against it, each on topics and a group of its own).
type blackBox struct {
	t      *testing.T
	bin    string
	addr   string
	args   []string
	dir    string
	n      int
	prefix string // of the test's topics and group ("" on the in-process broker)
	// changelog is the changelog topic verify reads ("changelog" unless a
	// test moves the consumers to another, before the prefix).
	changelog string
	// pause makes the broker answer nothing until resume is called.
	pause func() (resume func())
	// finishers are the last consumers finishWith started.
	finishers []*proc
	// ownGroup starts each consumer in a process group of its own: a
	// consumer stopped (SIGSTOP) in a group the kernel finds orphaned gets
	// SIGHUP and dies, where a frozen member should only freeze.
	ownGroup bool
}

// topic is the test's name for one of the service's topics.
func (b *blackBox) topic(name string) string { return b.prefix + name }

// blackBoxBroker is the broker's address: DRIFTSTREAM_KAFKA_ADDR, else a new
// in-process broker. prefix names the test's topics on a shared broker.
// pause stops the broker from answering (connections stay open, requests
// wait) until resume: the in-process broker holds every request, a real
// one is sent SIGSTOP and SIGCONT (its process id in DRIFTSTREAM_KAFKA_PID;
// without it the test that pauses fails, saying so).
func blackBoxBroker(t *testing.T, opts ...kfake.Opt) (addr, prefix string, pause func() (resume func())) {
	if addr := os.Getenv("DRIFTSTREAM_KAFKA_ADDR"); addr != "" {
		pause := func() func() {
			pid, err := strconv.Atoi(os.Getenv("DRIFTSTREAM_KAFKA_PID"))
			if err != nil {
				t.Fatalf("pausing the broker at DRIFTSTREAM_KAFKA_ADDR needs its process id in DRIFTSTREAM_KAFKA_PID (scripts/integration.sh sets it): %v", err)
			}
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatalf("SIGSTOP the broker (pid %d): %v", pid, err)
			}
			resumed := false
			resume := func() {
				if !resumed {
					resumed = true
					syscall.Kill(pid, syscall.SIGCONT)
				}
			}
			t.Cleanup(resume) // never leave a shared broker stopped
			return resume
		}
		name := strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				return r
			}
			return '-'
		}, t.Name())
		return addr, fmt.Sprintf("%s-%d-", name, time.Now().UnixNano()), pause
	}
	// As Apache Kafka does by default, the broker creates a topic that a
	// metadata or produce request names.
	c := kafkatest.Cluster(t, append([]kfake.Opt{kfake.GroupMinSessionTimeout(500 * time.Millisecond), kfake.AllowAutoTopicCreation()}, opts...)...)
	var paused atomic.Pointer[chan struct{}]
	// The control function runs on the broker's only request loop: while it
	// waits, no request of any client is answered.
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		if ch := paused.Load(); ch != nil {
			<-*ch
		}
		return nil, nil, false
	})
	pause = func() func() {
		ch := make(chan struct{})
		paused.Store(&ch)
		var once sync.Once
		resume := func() { once.Do(func() { paused.Store(nil); close(ch) }) }
		t.Cleanup(resume)
		return resume
	}
	return c.ListenAddrs()[0], "", pause
}

// proc is one consumer process and its log.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan error
}

func newBlackBox(t *testing.T, opts ...kfake.Opt) *blackBox {
	t.Helper()
	kafkatest.Slow(t) // separate processes, seconds each
	dir := t.TempDir()
	bin := filepath.Join(dir, "consumer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the consumer: %v\n%s", err, out)
	}
	addr, prefix, pause := blackBoxBroker(t, opts...)
	// The events topic exists before the first consumer, as in production;
	// the consumer creates the others.
	kafkatest.CreateTopic(t, addr, kafka.TopicConfig{Topic: prefix + "events", NumPartitions: blackBoxPartitions, ReplicationFactor: 1})
	args := []string{"-brokers", addr, "-group", prefix + "bb", "-dim", "6", "-learner", "lasec-ss", "-learner-params", `{"a":0.3}`,
		"-events-topic", prefix + "events", "-predictions-topic", prefix + "predictions", "-queries-topic", prefix + "label-queries",
		"-dead-letter-topic", prefix + "dead-letters", "-alerts-topic", prefix + "drift-alerts",
		"-partitions", strconv.Itoa(blackBoxPartitions), "-changelog-topic", prefix + "changelog", "-checkpoint-every", "150",
		"-checkpoint-period", "400ms", "-session-timeout", "2s", "-metrics-addr", "127.0.0.1:0", "-log-format", "json",
		"-fail-exit-after", "5s", "-shutdown-timeout", "20s"}
	t.Cleanup(func() {
		if d := os.Getenv("DRIFTSTREAM_BLACKBOX_LOGS"); d != "" && t.Failed() { // keep every consumer's log
			exec.Command("cp", "-r", dir, filepath.Join(d, prefix+filepath.Base(dir))).Run()
		}
	})
	return &blackBox{t: t, bin: bin, addr: addr, args: args, dir: dir, prefix: prefix, pause: pause, changelog: "changelog"}
}

func (b *blackBox) start() *proc {
	b.t.Helper()
	b.n++
	p := &proc{log: filepath.Join(b.dir, fmt.Sprintf("consumer-%d.log", b.n)), done: make(chan error, 1)}
	f, err := os.Create(p.log)
	if err != nil {
		b.t.Fatal(err)
	}
	p.cmd = exec.Command(b.bin, b.args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: b.ownGroup}
	if err := p.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait(); f.Close() }()
	b.t.Cleanup(func() { p.cmd.Process.Kill() })
	return p
}

// count is how many log lines of p contain frag.
func (p *proc) count(frag string) int {
	b, _ := os.ReadFile(p.log)
	return bytes.Count(b, []byte(frag))
}

func (p *proc) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func (p *proc) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(s); err != nil {
		t.Fatalf("signal %v: %v; %s", s, err, p.exited())
	}
}

// logLines are p's log lines that contain any of frags, joined (the last
// n bytes).
func (p *proc) logLines(n int, frags ...string) string {
	var out []string
	for _, line := range strings.Split(p.logText(), "\n") {
		if slices.ContainsFunc(frags, func(f string) bool { return strings.Contains(line, f) }) {
			out = append(out, line)
		}
	}
	return tail(strings.Join(out, "\n"), n)
}

// exited says how p ended, for a process found gone before the test
// stopped it: its exit status and its log's ERROR lines (its tail when it
// has none), so that a failure shows its cause where CI prints it.
func (p *proc) exited() string {
	status := "still exiting"
	select {
	case err := <-p.done:
		p.done <- err // for whoever waits next
		status = fmt.Sprintf("exit: %v", err)
	case <-time.After(2 * time.Second):
	}
	if errs := p.logLines(3000, `"level":"ERROR"`, "panic:"); errs != "" {
		return fmt.Sprintf("%s; the log's errors:\n%s", status, errs)
	}
	return fmt.Sprintf("%s; the log's tail:\n%s", status, tail(p.logText(), 3000))
}

func (p *proc) kill(t *testing.T) {
	t.Helper()
	p.signal(t, syscall.SIGKILL)
	<-p.done
}

// waitKilled waits for p, killed by another hand, to exit.
func (p *proc) waitKilled(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still running 30 s after its SIGKILL", p.log)
	}
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// waitFor is poll.Until.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, timeout, cond, poll.Text(what))
}

// producer writes events (a third unlabeled, answered by a label record
// a little later) over keys at about rate events a second, until stopped.
type producer struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	ids    []string
	err    error
}

func startProducer(t *testing.T, addr, topic string, keys, total, rate int) *producer {
	return startProducerFrom(t, addr, topic, keys, total, rate, 0)
}

// startProducerFrom is startProducer numbering its events from first on, with
// a stream of its own (a second producer after a first).
func startProducerFrom(t *testing.T, addr, topic string, keys, total, rate, first int) *producer {
	return startProducerWith(t, addr, topic, keys, total, rate, first, 0)
}

// startProducerWith is startProducerFrom with labels late by late events:
// with late > 0, a third of the events get their label record late events
// after them (the rest at the end), a sixth never get one, the others carry
// theirs inline.
func startProducerWith(t *testing.T, addr, topic string, keys, total, rate, first, late int) *producer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &producer{cancel: cancel}
	// librdkafka's default partitioner (crc32), not the service's murmur2:
	// outputs must land on their input's partition whatever put it there.
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Balancer: kafka.CRC32Balancer{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer w.Close()
		r := rand.New(rand.NewPCG(77, uint64(1+first)))
		const batch = 50
		tick := time.NewTicker(time.Second * batch / time.Duration(rate))
		defer tick.Stop()
		type label struct {
			due int
			msg kafka.Message
		}
		var waiting []label // late labels, in the order they are due
		for i := first; i < first+total; {
			var msgs []kafka.Message
			var ids []string
			for j := 0; j < batch && i < first+total; j, i = j+1, i+1 {
				for len(waiting) > 0 && waiting[0].due <= i {
					msgs, waiting = append(msgs, waiting[0].msg), waiting[1:]
				}
				key := fmt.Sprintf("k%d", r.IntN(keys))
				x, y := labeledPoint(r)
				id := fmt.Sprintf("e%d", i)
				ids = append(ids, id)
				xs, _ := json.Marshal(x)
				switch {
				case late > 0 && i%3 == 0:
					msgs = append(msgs, kafka.Message{Key: []byte(key), Value: fmt.Appendf(nil, `{"id":%q,"x":%s}`, id, xs)})
					waiting = append(waiting, label{due: i + late, msg: kafka.Message{Key: []byte(key), Value: fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, y)}})
					continue
				case late > 0 && i%6 == 1: // never labeled
					msgs = append(msgs, kafka.Message{Key: []byte(key), Value: fmt.Appendf(nil, `{"id":%q,"x":%s}`, id, xs)})
					continue
				}
				if i%3 == 0 {
					msgs = append(msgs, kafka.Message{Key: []byte(key), Value: fmt.Appendf(nil, `{"id":%q,"x":%s}`, id, xs)},
						kafka.Message{Key: []byte(key), Value: fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, y)})
				} else {
					msgs = append(msgs, kafka.Message{Key: []byte(key), Value: fmt.Appendf(nil, `{"id":%q,"x":%s,"label":%d}`, id, xs, y)})
				}
			}
			if i == first+total {
				for _, l := range waiting {
					msgs = append(msgs, l.msg)
				}
			}
			if err := writeRetrying(w, msgs); err != nil {
				p.mu.Lock()
				p.err = err
				p.mu.Unlock()
				return
			}
			p.mu.Lock()
			p.ids = append(p.ids, ids...)
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// writeRetrying writes msgs, again for up to 30 s while the broker refuses
// them, as a producer with retries does: a real broker briefly refuses a
// topic it has just created, and a single KRaft broker resumed after a
// pause longer than its session has partitions without a leader for a
// moment, which kafka-go's Writer reports as a plain error ("topic
// partition has no leader", seen once on 4.4.0 in the outage test). A
// retried write may put an event on the topic twice: the checks match
// predictions by position.
func writeRetrying(w *kafka.Writer, msgs []kafka.Message) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := w.WriteMessages(context.Background(), msgs...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// labeledPoint is a random 6-dimensional event and its label, from a fixed
// concept (the sign of x1 − x0 + x4 − x3).
func labeledPoint(r *rand.Rand) (x []float64, y int) {
	x = make([]float64, 6)
	m := 0.0
	for d := range x {
		x[d] = r.NormFloat64()
		m += float64(d%3-1) * x[d]
	}
	if y = 1; m < 0 {
		y = -1
	}
	return x, y
}

// finish waits for the producer to write everything and returns the ids.
func (p *producer) finish(t *testing.T) []string {
	t.Helper()
	p.wg.Wait()
	p.cancel()
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.ids
}

// readTopic reads every committed message of every partition of a topic
// (read_committed, as the service reads its input); nothing
// when the topic does not exist yet (asked in a way that never creates it:
// a real broker creates a topic that a metadata request names, with its
// default partition count).
func readTopic(t *testing.T, addr, topic string) map[int][]kafka.Message {
	t.Helper()
	out := map[int][]kafka.Message{}
	if !kafkatest.TopicExists(t, addr, topic) {
		return out
	}
	for p := 0; p < blackBoxPartitions; p++ {
		// A topic just created may not have settled its leaders: a retriable
		// error is retried, as any client does.
		deadline := time.Now().Add(30 * time.Second)
		for {
			var msgs []kafka.Message
			// What a read_committed consumer sees, as the service does: up to
			// the last stable offset, no record of an aborted transaction.
			tr := &kafka.Transport{}
			end, err := kafkaread.StableOffset(context.Background(), tr, kafka.TCP(addr), topic, p)
			if err == nil && end > 0 { // (End 0 is no end)
				cfg := kafkaread.FollowConfig{Topic: topic, Partition: p, End: end}
				err = kafkaread.Follow(context.Background(), tr, kafka.TCP(addr), cfg, func(batch []kafka.Message, _ int64) error {
					msgs = append(msgs, batch...)
					return nil
				})
			}
			tr.CloseIdleConnections()
			if err == nil {
				out[p] = msgs
				break
			}
			if !pipeline.IsRetriable(err) || time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return out
}

// markers are the changelog's markers per partition, in log order.
func (b *blackBox) markers() map[int][]checkpoint.Marker {
	out := map[int][]checkpoint.Marker{}
	for _, msgs := range readTopic(b.t, b.addr, b.topic(b.changelog)) {
		for _, m := range msgs {
			if rec, err := checkpoint.Decode(m.Value); err == nil && rec.Marker != nil {
				out[rec.Marker.Partition] = append(out[rec.Marker.Partition], *rec.Marker)
			}
		}
	}
	return out
}

// runToEnd writes evs to the events topic, and runs one member until every
// event of ids is predicted and every partition checkpointed through its
// last event; then it stops it cleanly.
func (b *blackBox) runToEnd(evs []kafka.Message, ids []string) {
	b.t.Helper()
	kafkatest.Write(b.t, b.addr, b.topic("events"), evs)
	first := b.start()
	b.waitPredicted(ids)
	waitFor(b.t, 60*time.Second, "every partition checkpointed through its last event", b.checkpointedToEnd)
	first.signal(b.t, syscall.SIGTERM)
	first.waitClean(b.t)
}

// checkpointedToEnd reports whether, in every events partition, the
// changelog's last accepted marker (a restore's: a frozen former owner's
// later marker is fenced) is through the partition's last offset.
func (b *blackBox) checkpointedToEnd() bool {
	store := checkpoint.NewMemoryStore()
	for p, msgs := range readTopic(b.t, b.addr, b.topic(b.changelog)) {
		log := make([]checkpoint.Entry, 0, len(msgs))
		for _, m := range msgs {
			if m.Value != nil { // a tombstone carries nothing
				log = append(log, checkpoint.Entry{Key: string(m.Key), Value: m.Value})
			}
		}
		store.SetLog(p, log)
	}
	for p, msgs := range readTopic(b.t, b.addr, b.topic("events")) {
		if len(msgs) == 0 {
			continue
		}
		snap, err := store.Load(context.Background(), p, nil)
		if err != nil || snap.Marker == nil || snap.Marker.Through[0] < msgs[len(msgs)-1].Offset {
			return false
		}
	}
	return true
}

// markedBy is how many partitions of the changelog hold a marker of epoch
// sequence owner.
func (b *blackBox) markedBy(owner uint64) int {
	n := 0
	for _, ms := range b.markers() {
		if slices.ContainsFunc(ms, func(m checkpoint.Marker) bool { return uint64(m.Epoch)>>32 == owner }) {
			n++
		}
	}
	return n
}

// markerAfterStale reports whether, in every changelog partition holding
// records of epoch sequence stale written after an ownership claim of
// sequence owner, a marker of sequence owner follows the last of them.
func (b *blackBox) markerAfterStale(stale, owner uint64) bool {
	found := false
	for _, msgs := range readTopic(b.t, b.addr, b.topic("changelog")) {
		claimed, lastStale, lastMarker := -1, -1, -1
		for i, m := range msgs {
			rec, err := checkpoint.Decode(m.Value)
			switch {
			case err != nil:
			case rec.Owner != nil && uint64(rec.Owner.Epoch)>>32 == owner:
				claimed = i
			case rec.Marker != nil && uint64(rec.Marker.Epoch)>>32 == owner:
				lastMarker = i
			case claimed >= 0 && rec.Key != nil && uint64(rec.Key.Epoch)>>32 == stale,
				claimed >= 0 && rec.Marker != nil && uint64(rec.Marker.Epoch)>>32 == stale:
				lastStale = i
			}
		}
		if lastStale >= 0 {
			found = true
			if lastMarker < lastStale {
				return false
			}
		}
	}
	return found
}

// verify compares the outputs and the changelog with an uninterrupted run
// of the same configuration over the events topic: every event predicted,
// every prediction byte-identical to the reference one, every key state
// byte-identical. It returns the duplicate predictions and fenced records.
func (b *blackBox) verify(ids []string) (dups, fenced int) {
	t := b.t
	t.Helper()
	pcfg := b.pipelineConfig()
	// Predictions are matched by the event's position (partition, offset):
	// a producer that retried a write after a broker outage may have put
	// the same event id on the topic twice, as a Kafka producer without
	// idempotence does.
	type at struct {
		Partition int
		Offset    int64
	}
	ref := checkpoint.NewMemoryStore()
	want := map[at][]byte{}
	inputs := map[string]int{} // events on the topic per id
	for p, msgs := range readTopic(t, b.addr, b.topic("events")) {
		w, err := pipeline.NewWorker(pcfg, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if err := w.Process(context.Background(), pipeline.Record{Topic: pipeline.EventsTopic, Partition: p, Offset: m.Offset, Key: m.Key, Value: m.Value}); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range w.TakeOutputs() {
			if o.Kind == pipeline.OutPrediction {
				var e struct {
					ID string
					at
				}
				json.Unmarshal(o.Value, &e)
				want[e.at] = o.Value
				inputs[e.ID]++
			}
		}
		if _, _, err := w.Checkpoint(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
	}
	got, gotIDs := map[at]int{}, map[string]bool{}
	differing, misplaced := 0, 0
	for p, msgs := range readTopic(t, b.addr, b.topic("predictions")) {
		for _, m := range msgs {
			var e struct {
				ID string
				at
			}
			json.Unmarshal(m.Value, &e)
			if e.Partition != p { // outputs land on their input's partition number, whatever the producer's partitioner
				misplaced++
			}
			got[e.at]++
			gotIDs[e.ID] = true
			if !bytes.Equal(m.Value, want[e.at]) {
				differing++
				if differing < 4 {
					t.Errorf("prediction differs from the uninterrupted run:\n got %s\nwant %s", m.Value, want[e.at])
				}
			}
		}
	}
	missing, written := 0, 0
	for _, id := range ids {
		if !gotIDs[id] || inputs[id] == 0 {
			missing++
		}
		written += max(0, inputs[id]-1)
	}
	for pos := range want { // an event written twice is predicted at both places
		if got[pos] == 0 {
			missing++
		}
	}
	for _, n := range got {
		dups += max(0, n-1)
	}
	if written > 0 {
		t.Logf("the producer wrote %d events twice (a write retried after a timeout)", written)
	}
	store, err := checkpoint.NewKafkaStore(&kafka.Dialer{}, []string{b.addr}, b.topic(b.changelog))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	keys, wrong := 0, 0
	for p := 0; p < blackBoxPartitions; p++ {
		snap, err := store.Load(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		fenced += snap.Fenced
		rsnap, _ := ref.Load(context.Background(), p, nil)
		pw, behind := 0, 0
		for k, r := range rsnap.Keys {
			keys++
			if !bytes.Equal(snap.Keys[k].State, r.State) {
				pw++
				if snap.Keys[k].AppliedThrough != r.AppliedThrough {
					behind++
				}
			}
		}
		wrong += pw
		if pw > 0 { // stale (the last checkpoint missing) or divergent?
			var through, end any = "no marker", "no marker"
			if snap.Marker != nil {
				through = snap.Marker.Through
			}
			if rsnap.Marker != nil {
				end = rsnap.Marker.Through
			}
			t.Errorf("partition %d: %d of %d final states differ (%d of them applied other offsets than the reference); the changelog's marker is through %v, the reference's %v",
				p, pw, len(rsnap.Keys), behind, through, end)
		}
		if len(snap.Keys) != len(rsnap.Keys) {
			t.Errorf("partition %d: %d keys in the changelog, %d in the reference", p, len(snap.Keys), len(rsnap.Keys))
		}
	}
	if wrong > 0 {
		for i, p := range b.finishers {
			t.Logf("the finishing member %d's log, warnings and errors:\n%s", i, p.logLines(4000, `"level":"WARN"`, `"level":"ERROR"`))
		}
	}
	t.Logf("%d events: %d missing, %d differing predictions, %d duplicates (identical), %d on another partition than their input; %d keys, %d final states differ; %d fenced records",
		len(ids), missing, differing, dups, misplaced, keys, wrong, fenced)
	if missing != 0 || differing != 0 || wrong != 0 || misplaced != 0 {
		t.Fatalf("%d missing, %d differing predictions, %d wrong final states, %d predictions on another partition than their input", missing, differing, wrong, misplaced)
	}
	return dups, fenced
}

// pipelineConfig is the pipeline configuration the consumers run with.
func (b *blackBox) pipelineConfig() pipeline.Config {
	b.t.Helper()
	cfg, err := config.Load(flag.NewFlagSet("ref", flag.ContinueOnError), b.args)
	if err != nil {
		b.t.Fatal(err)
	}
	pcfg, err := pipelineConfig(cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	return pcfg
}

// predicted counts the predictions on the predictions topic by event id.
func (b *blackBox) predicted() map[string]int {
	seen := map[string]int{}
	for _, msgs := range readTopic(b.t, b.addr, b.topic("predictions")) {
		for _, m := range msgs {
			var e struct{ ID string }
			json.Unmarshal(m.Value, &e)
			seen[e.ID]++
		}
	}
	return seen
}

// waitPredicted waits until every event of ids has a prediction.
func (b *blackBox) waitPredicted(ids []string) {
	b.t.Helper()
	waitFor(b.t, 90*time.Second, "every event predicted", func() bool {
		return len(b.predicted()) >= len(ids)
	})
}

// finishWith runs a last consumer, alongside the live ones given, until
// every event is predicted, stops them all with SIGTERM, and checks that
// each stop was clean: exit 0, nothing logged at ERROR.
func (b *blackBox) finishWith(ids []string, live ...*proc) {
	t := b.t
	t.Helper()
	last := b.start()
	b.finishers = append(b.finishers, last)
	all := append(live, last)
	defer func() {
		if t.Failed() {
			for _, p := range all {
				p.cmd.Process.Signal(syscall.SIGQUIT) // a goroutine dump in its log
			}
			time.Sleep(500 * time.Millisecond) // newBlackBox's cleanup keeps the logs (DRIFTSTREAM_BLACKBOX_LOGS)
		}
	}()
	b.waitPredicted(ids)
	// Alone, the last member must have taken every partition before it is
	// stopped: its final checkpoint is what the changelog is compared on (on
	// a real broker it joins slower than every event is predicted). Beside
	// live members it may be a standby.
	if len(live) == 0 {
		waitFor(t, 60*time.Second, "the last member's partitions", func() bool { return last.count(`"partition restored"`) >= blackBoxPartitions })
	}
	// Every partition's last event is in a checkpoint before the stop: a
	// member stopped while it still restores or replays (it may have just
	// been given a partition whose events a killed member had predicted)
	// leaves the rest to a next owner, which this test does not start.
	waitFor(t, 60*time.Second, "every partition checkpointed through its last event", b.checkpointedToEnd)
	for _, p := range all {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range all {
		p.waitClean(t)
	}
}

// failsSaying waits up to timeout for p to exit non-zero with frag in its
// log: a start or a run that must fail, loudly and at once.
func (p *proc) failsSaying(t *testing.T, timeout time.Duration, what, frag string) {
	t.Helper()
	select {
	case err := <-p.done:
		if err == nil || !strings.Contains(p.logText(), frag) {
			t.Fatalf("%s: exit %v; want a non-zero exit saying %q:\n%s", what, err, frag, tail(p.logText(), 3000))
		}
	case <-time.After(timeout):
		t.Fatalf("%s: still running after %s:\n%s", what, timeout, tail(p.logText(), 3000))
	}
}

// waitClean waits for p, stopped by SIGTERM, to exit 0 without an ERROR
// line in its log.
func (p *proc) waitClean(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("%s exited with %v:\n%s", p.log, err, tail(p.logText(), 3000))
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not stop on SIGTERM", p.log)
	}
	if p.count(`"level":"ERROR"`) > 0 {
		t.Fatalf("%s logged an error:\n%s", p.log, p.logText())
	}
}

// The zombie scenario of issue 8, as a user would run it: consumer A is
// frozen (SIGSTOP) past its session timeout while B takes over its
// partitions; A resumes and writes its stale checkpoint; B is killed right
// after; C (with A, now a new member) restores and finishes. The stale records are fenced: nothing
// is missing, no output differs from an uninterrupted run, and the final
// states are byte-identical.
func TestBlackBoxZombieWriter(t *testing.T) {
	b := newBlackBox(t)
	a := b.start()
	waitFor(t, 60*time.Second, "A restores its partitions", func() bool { return a.count(`"partition restored"`) >= blackBoxPartitions })
	// Events keep coming until well after A resumes (6 s at 4,000 a
	// second), so that B has records to checkpoint after A's stale write.
	prod := startProducer(t, b.addr, b.topic("events"), 200, 24000, 4000)
	// A is frozen while it processes (with records not yet checkpointed):
	// on a real broker the first events can take a moment to arrive.
	waitFor(t, 60*time.Second, "A's first predictions", func() bool { return countAll(readTopic(t, b.addr, b.topic("predictions"))) >= 1000 })
	a.signal(t, syscall.SIGSTOP)
	bb := b.start()
	waitFor(t, 60*time.Second, "B takes over every partition", func() bool { return bb.count(`"partition restored"`) >= blackBoxPartitions })
	waitFor(t, 30*time.Second, "B's first checkpoint of every partition", func() bool { return b.markedBy(2) == blackBoxPartitions })
	a.signal(t, syscall.SIGCONT)
	waitFor(t, 30*time.Second, "A's stale checkpoint and refused commit", func() bool { return a.count("partition ownership lost") > 0 })
	// B checkpoints once more — its marker follows A's stale records, which
	// without fencing it would vouch for — and is killed right after.
	waitFor(t, 30*time.Second, "B's marker after A's stale records", func() bool { return b.markerAfterStale(1, 2) })
	bb.kill(t)
	// A rejoins as a new member and, with C, restores from the fenced
	// changelog. (A is not killed too: kfake keeps a member that died
	// between JoinGroup and SyncGroup in the group for good, where Kafka
	// would expire its session.)
	ids := prod.finish(t)
	b.finishWith(ids, a)
	_, fenced := b.verify(ids)
	if fenced == 0 {
		t.Fatal("no record of the frozen consumer was fenced: the scenario did not happen")
	}
}

// Consumers killed with SIGKILL at random points while events arrive, then
// a last one finishes: exactly-once state, at-least-once output.
// DRIFTSTREAM_BLACKBOX_KILLS sets the number of kills (3 by default, to keep
// the suite fast; the closing note's figures use 20).
func TestBlackBoxKill9(t *testing.T) {
	kills := 3
	if s := os.Getenv("DRIFTSTREAM_BLACKBOX_KILLS"); s != "" {
		var err error
		if kills, err = strconv.Atoi(s); err != nil {
			t.Fatalf("DRIFTSTREAM_BLACKBOX_KILLS=%q: %v", s, err)
		}
	}
	b := newBlackBox(t)
	prod := startProducer(t, b.addr, b.topic("events"), 300, 2000*(kills+2), 2000)
	r := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < kills; i++ {
		p := b.start()
		// Some kills land during restore, most while processing.
		if i%4 != 3 {
			waitFor(t, 60*time.Second, "partitions restored", func() bool { return p.count(`"partition restored"`) >= 1 })
		}
		time.Sleep(time.Duration(100+r.IntN(1400)) * time.Millisecond)
		p.kill(t)
	}
	ids := prod.finish(t)
	b.finishWith(ids)
	b.verify(ids)
}

// A process found gone is reported with its exit status and its log's
// errors.
func TestExitedReportsTheCause(t *testing.T) {
	p := &proc{log: filepath.Join(t.TempDir(), "log"), done: make(chan error, 1)}
	if err := os.WriteFile(p.log, []byte("{\"level\":\"INFO\",\"msg\":\"fine\"}\n{\"level\":\"ERROR\",\"msg\":\"partition failed\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command("sh", "-c", "exit 3")
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	got := p.exited()
	if !strings.Contains(got, "exit status 3") || !strings.Contains(got, "partition failed") || strings.Contains(got, "fine") {
		t.Fatalf("exited() = %q", got)
	}
}

// Consumers killed with SIGKILL and restarted with the same -instance-id
// (what the Helm chart's pod name gives a restarted container) remove the
// group membership their former process left, on a real broker's group
// coordinator: each restarted process logs one membership of one removed,
// and the run ends with exactly-once state (the 30 s session timeout keeps
// a killed member in the group for the whole test unless it is removed).
func TestBlackBoxKill9RestartRemovesItsFormerMembership(t *testing.T) {
	b := newBlackBox(t)
	b.args = append(b.args, "-instance-id", b.prefix+"pod-0", "-session-timeout", "30s")
	prod := startProducer(t, b.addr, b.topic("events"), 300, 8000, 2000)
	for i := range 2 {
		p := b.start()
		waitFor(t, 60*time.Second, "partitions restored", func() bool { return p.count(`"partition restored"`) >= blackBoxPartitions })
		removed := p.count(`"removed the group membership of a former process`)
		if want := min(i, 1); removed != want || p.count(`"memberships":1`) != want || p.count("could not be removed") != 0 {
			t.Fatalf("process %d logged %d removals (want %d, of one membership each):\n%s", i+1, removed, want, tail(p.logText(), 4000))
		}
		time.Sleep(500 * time.Millisecond)
		p.kill(t)
	}
	ids := prod.finish(t)
	b.finishWith(ids)
	if last := b.finishers[len(b.finishers)-1]; last.count(`"removed the group membership of a former process`) != 1 {
		t.Fatalf("the last process removed no membership of the killed one:\n%s", tail(last.logText(), 4000))
	}
	b.verify(ids)
}

// freeAddr is a loopback address no one listens on now (for a metrics
// server).
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
