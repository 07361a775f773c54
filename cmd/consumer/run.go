package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/service"
	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// runService is the default subcommand: the Kafka service, or with -embedded
// an in-process broker, a demo producer and the service.
func runService(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "", "comma-separated Kafka bootstrap brokers (host:port)")
	group := fs.String("group", "driftstream", "consumer group id")
	learner := fs.String("learner", "lasec-ss", "learner for every key (see 'consumer learners')")
	params := fs.String("params", "", "learner parameters as a JSON object")
	dim := fs.Int("dim", 0, "input dimension of dense \"x\" events")
	hashBits := fs.Int("hash-bits", 0, "hash named \"features\" into 2^k buckets")
	seed := fs.Uint64("seed", 1, "global seed: every key's learner draws from a stream of (seed, key)")
	partitions := fs.Int("partitions", 4, "partitions of topics the service creates")
	replication := fs.Int("replication", 1, "replication factor of topics the service creates")
	eventsTopic := fs.String("events-topic", "events", "input events and label records")
	labelsTopic := fs.String("labels-topic", "", "optional separate labels topic (must be co-partitioned with the events topic)")
	predTopic := fs.String("predictions-topic", "predictions", "predictions output topic")
	queryTopic := fs.String("queries-topic", "label-queries", "label-queries output topic")
	deadTopic := fs.String("dead-letter-topic", "dead-letters", "dead-letter output topic")
	changelog := fs.String("changelog-topic", "driftstream-changelog", "compacted checkpoint topic")
	checkpointDir := fs.String("checkpoint-dir", "", "keep checkpoints in this local directory instead of the changelog topic (single node)")
	every := fs.Int("checkpoint-every", 1000, "checkpoint a partition every this many records")
	interval := fs.Duration("checkpoint-interval", 5*time.Second, "and at least this often")
	queryScale := fs.Float64("query-scale", 1, "margin rule b/(b+|score|) for learners without a native query rule (0: never query)")
	maxPending := fs.Int("max-pending", 1000, "pending label queries kept per key")
	pendingTTL := fs.Int64("pending-ttl", 1_000_000, "a pending query expires after this many later records of its partition")
	embedded := fs.Bool("embedded", false, "start an in-process Kafka broker and a demo producer: no setup needed")
	embeddedAddr := fs.String("embedded-addr", "127.0.0.1:9092", "where the embedded broker listens (any Kafka client can connect)")
	demoEvents := fs.Int("demo-events", 0, "with -embedded: stop after this many events are processed and print a JSON summary (0: run until interrupted)")
	demoKeys := fs.Int("demo-keys", 200, "with -embedded: number of entities in the demo stream")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "consumer: "+format+"\n", a...)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return usage("unexpected arguments %q", fs.Args())
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *embedded {
		if *dim == 0 && *hashBits == 0 {
			*dim = demoDim
		}
		if *brokers != "" {
			return usage("-brokers and -embedded exclude each other: -embedded runs its own broker on -embedded-addr")
		}
		ln, err := net.Listen("tcp", *embeddedAddr)
		if err != nil {
			return usage("-embedded-addr %s: %v (choose a free address, e.g. -embedded-addr 127.0.0.1:19092)", *embeddedAddr, err)
		}
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(func(string, string) (net.Listener, error) { return ln, nil }))
		if err != nil {
			fmt.Fprintf(stderr, "consumer: embedded broker: %v\n", err)
			return exitError
		}
		defer cluster.Close()
		*brokers = cluster.ListenAddrs()[0]
		fmt.Fprintf(stderr, "embedded Kafka broker listening on %s\n", *brokers)
	} else if *demoEvents > 0 {
		return usage("-demo-events needs -embedded")
	}
	if *brokers == "" {
		return usage("no brokers: set -brokers host:port[,host:port] (or use -embedded for a self-contained demo)")
	}
	vec, err := topics.NewVectorizer(*dim, *hashBits)
	if err != nil {
		return usage("%v", err)
	}
	cfg := service.Config{Brokers: strings.Split(*brokers, ","), Group: *group, Partitions: *partitions, Replication: *replication,
		Topics: service.Topics{Events: *eventsTopic, Labels: *labelsTopic, Predictions: *predTopic, Queries: *queryTopic, DeadLetters: *deadTopic, Changelog: *changelog},
		Pipeline: pipeline.Config{Learner: *learner, Params: json.RawMessage(*params), Seed: *seed, Vector: vec, QueryScale: *queryScale,
			MaxPending: *maxPending, PendingTTL: *pendingTTL, TopicNames: [2]string{*eventsTopic, *labelsTopic}},
		CheckpointEvery: *every, CheckpointInterval: *interval, Logger: log}
	if *params == "" {
		cfg.Pipeline.Params = nil
	}
	if err := cfg.Pipeline.Validate(); err != nil {
		return usage("%v", err)
	}
	if *checkpointDir != "" {
		st, err := checkpoint.NewFileStore(*checkpointDir, 0)
		if err != nil {
			return usage("%v", err)
		}
		cfg.Store = st
	}
	svc, err := service.New(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "consumer: %v\n", err)
		return exitError
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if *embedded {
		go func() {
			if err := demoProducer(runCtx, cfg, *demoKeys, *demoEvents, *seed); err != nil && runCtx.Err() == nil {
				log.Error("demo producer stopped", "error", err)
			}
		}()
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- svc.Run(runCtx) }()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintf(stderr, "consumer: %v\n", err)
				return exitError
			}
			return exitOK
		case <-tick.C:
			t := svc.Totals()
			fmt.Fprintf(stderr, "%6.1fs  events %d  predictions %d  label queries %d  labels joined %d  dead letters %d  accuracy %.3f\n",
				time.Since(start).Seconds(), t.Events, t.Predictions, t.Queries, t.LabelsJoined, t.DeadLetters, accuracy(t))
		case <-time.After(20 * time.Millisecond):
			if *demoEvents > 0 && svc.Totals().Events >= int64(*demoEvents) {
				elapsed := time.Since(start).Seconds()
				cancel() // graceful: every partition checkpoints before Run returns
				if err := <-done; err != nil {
					fmt.Fprintf(stderr, "consumer: %v\n", err)
					return exitError
				}
				t := svc.Totals()
				json.NewEncoder(stdout).Encode(map[string]any{"events": t.Events, "predictions": t.Predictions, "label_queries": t.Queries,
					"labels_joined": t.LabelsJoined, "dead_letters": t.DeadLetters, "accuracy": accuracy(t), "events_per_sec": float64(t.Events) / elapsed})
				return exitOK
			}
		}
	}
}

func accuracy(t service.Totals) float64 {
	if t.Labeled == 0 {
		return 0
	}
	return 1 - float64(t.Mistakes)/float64(t.Labeled)
}

// demoDim is the dimension of the demo stream.
const demoDim = 10

// demoProducer writes a drifting stream for many keys: each key's target
// hyperplane switches every 2,000 of its events; half the events carry their
// label, the others are answered when the service asks for the label (read
// from the label-queries topic) by a label record sent 50 ms later.
func demoProducer(ctx context.Context, cfg service.Config, keys, total int, seed uint64) error {
	w := &kafka.Writer{Addr: kafka.TCP(cfg.Brokers...), Topic: cfg.Topics.Events, Balancer: &kafka.Hash{}, BatchTimeout: 2 * time.Millisecond}
	defer w.Close()
	r := rand.New(rand.NewPCG(seed, 0xde30))
	targets := make([][]float64, keys)
	seen := make([]int, keys)
	truth := newTruth()
	go answerQueries(ctx, cfg, w, truth)
	for i := 0; total == 0 || i < total; {
		var batch []kafka.Message
		for j := 0; j < 200 && (total == 0 || i < total); j, i = j+1, i+1 {
			k := r.IntN(keys)
			if seen[k]%2000 == 0 {
				targets[k] = make([]float64, demoDim)
				for d := range targets[k] {
					targets[k][d] = r.NormFloat64()
				}
			}
			seen[k]++
			x := make([]float64, demoDim)
			m := 0.0
			for d := range x {
				x[d] = r.NormFloat64()
				m += targets[k][d] * x[d]
			}
			y := 1
			if m < 0 {
				y = -1
			}
			id := fmt.Sprintf("demo-%d", i)
			key := fmt.Sprintf("entity-%d", k)
			xs, _ := json.Marshal(x)
			if r.IntN(2) == 0 {
				batch = append(batch, kafka.Message{Key: []byte(key), Value: []byte(fmt.Sprintf(`{"id":%q,"x":%s,"label":%d}`, id, xs, y))})
			} else {
				truth.put(id, key, y)
				batch = append(batch, kafka.Message{Key: []byte(key), Value: []byte(fmt.Sprintf(`{"id":%q,"x":%s}`, id, xs))})
			}
		}
		if err := w.WriteMessages(ctx, batch...); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// truth remembers the labels of the demo's unlabeled events until asked.
type truth struct {
	mu     chan struct{}
	labels map[string]labelOf
}

type labelOf struct {
	key   string
	label int
}

func newTruth() *truth { return &truth{mu: make(chan struct{}, 1), labels: map[string]labelOf{}} }

func (t *truth) put(id, key string, y int) {
	t.mu <- struct{}{}
	t.labels[id] = labelOf{key, y}
	<-t.mu
}

func (t *truth) take(id string) (labelOf, bool) {
	t.mu <- struct{}{}
	defer func() { <-t.mu }()
	l, ok := t.labels[id]
	delete(t.labels, id)
	return l, ok
}

// answerQueries reads the label-queries topic and sends each asked label as a
// label record on the events topic, 50 ms later.
func answerQueries(ctx context.Context, cfg service.Config, w *kafka.Writer, t *truth) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: cfg.Brokers, GroupID: cfg.Group + "-demo-labeler", Topic: cfg.Topics.Queries,
		MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 50 * time.Millisecond, StartOffset: kafka.FirstOffset})
	defer r.Close()
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return
		}
		var q struct{ ID string }
		if json.Unmarshal(m.Value, &q) != nil {
			continue
		}
		l, ok := t.take(q.ID)
		if !ok {
			continue
		}
		go func() {
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				return
			}
			w.WriteMessages(ctx, kafka.Message{Key: []byte(l.key), Value: []byte(fmt.Sprintf(`{"id":%q,"label":%d}`, q.ID, l.label))})
		}()
	}
}
