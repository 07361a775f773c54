package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txnWriter is a franz-go client (a producer nobody here wrote) onto the
// events topic, keyed with its default partitioner (murmur2, as the
// service's contract), transactional when id is set.
func txnWriter(t *testing.T, addr, topic, id string) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks())}
	if id != "" {
		opts = append(opts, kgo.TransactionalID(id), kgo.TransactionTimeout(60*time.Second))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// txnInput writes events of the black-box concept through franz-go
// clients, remembering which ids a read_committed reader must see.
type txnInput struct {
	t       *testing.T
	r       *rand.Rand
	n       int
	kept    []string // ids of committed and plain events
	aborted []string // ids written only in aborted transactions
	// unlabeled are committed events written without a label, whose label
	// record comes later.
	unlabeled []struct{ key, id string }
}

func (in *txnInput) event(cl *kgo.Client, prefix string, labeled, kept bool) {
	in.t.Helper()
	in.n++
	key := fmt.Sprintf("k%d", in.r.IntN(40))
	id := fmt.Sprintf("%s%d", prefix, in.n)
	x, y := labeledPoint(in.r)
	xs, _ := json.Marshal(x)
	v := fmt.Sprintf(`{"id":%q,"x":%s,"label":%d}`, id, xs, y)
	if !labeled {
		v = fmt.Sprintf(`{"id":%q,"x":%s}`, id, xs)
		if kept {
			in.unlabeled = append(in.unlabeled, struct{ key, id string }{key, id})
		}
	}
	in.send(cl, key, v)
	if kept {
		in.kept = append(in.kept, id)
	} else {
		in.aborted = append(in.aborted, id)
	}
}

func (in *txnInput) send(cl *kgo.Client, key, value string) {
	in.t.Helper()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
		in.t.Fatalf("produce: %v", err)
	}
}

// labels answers the unlabeled events: in an aborted transaction with the
// wrong label first when wrong is given, then for real.
func (in *txnInput) labels(cl *kgo.Client, wrong *kgo.Client) {
	in.t.Helper()
	for _, u := range in.unlabeled {
		if wrong != nil {
			in.send(wrong, u.key, fmt.Sprintf(`{"id":%q,"label":-1}`, u.id))
		}
		in.send(cl, u.key, fmt.Sprintf(`{"id":%q,"label":1}`, u.id))
	}
	in.unlabeled = nil
}

func txnBegin(t *testing.T, cl *kgo.Client) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
}

func txnEnd(t *testing.T, cl *kgo.Client, commit bool) {
	t.Helper()
	if err := cl.EndTransaction(context.Background(), kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// An upstream that writes with transactions, as Kafka Streams and Flink
// do, read at the default isolation (read_committed): committed, aborted
// and plain events interleaved on every partition, an aborted malformed
// record and aborted wrong labels, a transaction left open past the
// consumer's fetches and across a kill -9, and an exactly-once producer
// that retries an aborted batch in a new transaction. Every committed and
// plain event is predicted exactly as an uninterrupted run over the
// committed records predicts it, with identical final key states; no
// aborted event is predicted and nothing is dead-lettered.
func TestBlackBoxTransactionalInput(t *testing.T) {
	b := newBlackBox(t)
	events := b.topic("events")
	a := txnWriter(t, b.addr, events, b.prefix+"txn-a")
	c := txnWriter(t, b.addr, events, b.prefix+"txn-c")
	plain := txnWriter(t, b.addr, events, "")
	in := &txnInput{t: t, r: rand.New(rand.NewPCG(3, 4))}
	round := func(commit bool) {
		txnBegin(t, a)
		txnBegin(t, c)
		for i := range 60 {
			in.event(a, "a-", i%4 != 0, commit)
			in.event(c, "c-", true, !commit)
			in.event(plain, "p-", i%5 != 0, true)
		}
		loser := a
		if commit {
			loser = c
		}
		in.send(loser, "k1", `{"id":"aborted-malformed","x":[1,2`) // dead-lettered if it were read
		in.labels(plain, loser)                                    // the wrong labels are aborted
		txnEnd(t, a, commit)
		txnEnd(t, c, !commit)
	}
	round(true)
	round(false)
	// A transaction left open while the consumer reads: it and everything
	// written after it wait.
	txnBegin(t, c)
	for range 30 {
		in.event(c, "open-", true, true)
	}
	for range 30 {
		in.event(plain, "after-open-", true, true)
	}
	first := b.start()
	waitFor(t, 60*time.Second, "the events before the open transaction predicted", func() bool {
		return len(b.predicted()) >= len(in.kept)-60
	})
	time.Sleep(300 * time.Millisecond) // more fetches stop at the open transaction
	if got := len(b.predicted()); got != len(in.kept)-60 {
		t.Fatalf("%d events predicted while a transaction is open, want the %d before it", got, len(in.kept)-60)
	}
	first.kill(t)
	txnEnd(t, c, true)
	// An exactly-once producer retries an aborted batch in a new
	// transaction: the committed copy counts, once.
	txnBegin(t, a)
	var retried []string
	for range 40 {
		in.event(a, "retry-", true, false)
		retried = append(retried, in.aborted[len(in.aborted)-1])
	}
	txnEnd(t, a, false)
	txnBegin(t, a)
	for _, id := range retried {
		x, y := labeledPoint(in.r)
		xs, _ := json.Marshal(x)
		in.send(a, "k2", fmt.Sprintf(`{"id":%q,"x":%s,"label":%d}`, id, xs, y))
		in.kept = append(in.kept, id)
	}
	txnEnd(t, a, true)
	round(true)

	b.finishWith(in.kept)
	dups, _ := b.verify(in.kept)
	predicted := b.predicted()
	abortedSeen := 0
	for _, id := range in.aborted {
		if predicted[id] > 0 && !strings.HasPrefix(id, "retry-") {
			abortedSeen++
		}
	}
	deadLetters := 0
	for _, msgs := range readTopic(t, b.addr, b.topic("dead-letters")) {
		deadLetters += len(msgs)
	}
	t.Logf("%d committed or plain events, %d aborted ones (%d retried and committed); %d distinct ids predicted, %d duplicates, %d aborted ones predicted, %d dead letters",
		len(in.kept), len(in.aborted), len(retried), len(predicted), dups, abortedSeen, deadLetters)
	if len(predicted) != len(in.kept) || abortedSeen != 0 || deadLetters != 0 {
		t.Fatalf("%d ids predicted, want %d; %d aborted events predicted, %d dead letters, want 0 and 0", len(predicted), len(in.kept), abortedSeen, deadLetters)
	}
}
