// Command producer puts streams onto Kafka for driftstream:
//
//	producer synth -generator 'sea?T=50000' -brokers host:9092 [-keys 100] [-labels-delay 50]
//	producer replay -file data.csv -label class -positive UP -brokers host:9092 [-rate 1000]
//	producer replay -from-topic events -to-topic events-copy -speed 10 [-from-time RFC3339 | -from-offset N]
//	producer replay -file events.jsonl -labels-data labels.jsonl -labels-topic labels -key cust -dim 10
//
// Events follow docs/spec/DESIGN.md §2. Keys come from a key column (CSV -key) or are
// spread over -keys entities. With -labels-delay N, labels are held back and
// sent as label records N events later (on -labels-topic, default the events
// topic), the way late ground truth arrives in production. On a labels
// topic of their own, every record is stamped so that the service's merge
// of the two topics by timestamp takes them in the order they were made
// (backtest.MessageOptions.Clock). A history kept as two JSONL files
// (-labels-data) goes to the two topics with each record stamped with its
// line's "ts".
//
// Partitioning: an event and its label record must reach the same partition
// (docs/spec/DESIGN.md §2: co-partitioned by entity key). -partitioner picks the hash
// that maps a key to a partition, so that this producer agrees with the
// other clients writing the same topics: murmur2 (the default: Java clients,
// Kafka Streams, franz-go), crc32 (librdkafka's consistent and
// consistent_random: kcat, confluent-kafka-python, -go, -dotnet), fnv1a
// (Sarama's and kafka-go's default hash).
//
// Exit codes: 0 ok, 2 bad usage, 1 runtime error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
	"github.com/segmentio/kafka-go"
)

// version and commit are set at build time (-ldflags "-X main.version=...").
var (
	version = "dev"
	commit  = "unknown"
)

const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// common are the flags shared by the modes that produce events.
type common struct {
	brokers, topic, labelsTopic string
	keys, labelsDelay           int
	rate                        float64
	seed                        uint64
	partitioner                 string
}

// balancer returns the balancer -partitioner names (topics.Balancer).
func (c *common) balancer() (kafka.Balancer, error) {
	b, err := topics.Balancer(c.partitioner)
	if err != nil {
		return nil, fmt.Errorf("-%w", err)
	}
	return b, nil
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "comma-separated Kafka brokers")
	fs.StringVar(&c.topic, "topic", "events", "events topic")
	fs.StringVar(&c.labelsTopic, "labels-topic", "", "topic for delayed label records (default: the events topic)")
	fs.IntVar(&c.keys, "keys", 100, "spread events over this many entity keys (when the data has no key column)")
	fs.IntVar(&c.labelsDelay, "labels-delay", 0, "send each label as a label record this many events later (0: inline)")
	fs.Float64Var(&c.rate, "rate", 0, "events per second (0: as fast as possible)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of generators")
	fs.StringVar(&c.partitioner, "partitioner", topics.DefaultPartitioner, "key → partition hash, to agree with the other producers of the topics: murmur2 (Java clients), crc32 (librdkafka, kcat), fnv1a (Sarama, kafka-go)")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const usageLine = "usage: producer synth|replay|version [flags]; 'producer synth -h' and 'producer replay -h' list the flags"
	if len(args) == 0 {
		fmt.Fprintln(stderr, usageLine)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usageLine)
		return exitOK
	}
	if args[0] == "version" {
		fmt.Fprintln(stdout, version, commit)
		return exitOK
	}
	usage := func(err error) int {
		fmt.Fprintf(stderr, "producer: %v\n", err)
		return exitUsage
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs)
	var src streams.Source
	switch args[0] {
	case "synth":
		gen := fs.String("generator", "", "generator and parameters, e.g. 'sea?T=50000' (see 'consumer backtest -list-generators')")
		if err := fs.Parse(args[1:]); err != nil {
			return parseExit(err)
		}
		if *gen == "" {
			return usage(errors.New("-generator is required"))
		}
		s, err := streams.OpenSynth(*gen, c.seed)
		if err != nil {
			return usage(err)
		}
		src = s
	case "replay":
		file := fs.String("file", "", "CSV, ARFF or JSONL file (.gz read transparently)")
		label := fs.String("label", "", "CSV/ARFF label column")
		positive := fs.String("positive", "", "label value that means +1")
		negative := fs.String("negative", "", "label value that means -1 (others are then errors)")
		header := fs.Bool("header", false, "CSV: the first row names the columns")
		keyCol := fs.String("key", "", "CSV column or JSONL field holding the entity key")
		dim := fs.Int("dim", 0, "JSONL: dense dimension")
		hashBits := fs.Int("hash-bits", 0, "JSONL: hash bits for named features")
		fromTopic := fs.String("from-topic", "", "replay this topic instead of a file")
		toTopic := fs.String("to-topic", "", "with -from-topic: the destination topic")
		speed := fs.Float64("speed", 1, "with -from-topic: time scale (2 = twice as fast as recorded; 0 = as fast as possible)")
		fromOffset := fs.Int64("from-offset", 0, "with -from-topic: start offset in every partition")
		fromTime := fs.String("from-time", "", "with -from-topic: start at this RFC 3339 time instead")
		labelsData := fs.String("labels-data", "", "with a JSONL -file of events: the labels that came later, a JSONL file of label records, written to -labels-topic; every line of both files needs its -key field and \"ts\", which becomes its record timestamp (the service merges the two topics by it, as 'consumer backtest -keyed -labels-data' merges the files)")
		if err := fs.Parse(args[1:]); err != nil {
			return parseExit(err)
		}
		if *labelsData != "" {
			return replayTwoFiles(ctx, c, *file, *labelsData, streams.JSONLOptions{Dim: *dim, HashBits: *hashBits, KeyField: *keyCol}, stderr)
		}
		if *fromTopic != "" {
			if *file != "" || *toTopic == "" {
				return usage(errors.New("-from-topic needs -to-topic and excludes -file"))
			}
			var since time.Time
			if *fromTime != "" {
				t, err := time.Parse(time.RFC3339, *fromTime)
				if err != nil {
					return usage(fmt.Errorf("-from-time %q: %v", *fromTime, err))
				}
				since = t
			}
			if *speed < 0 {
				return usage(fmt.Errorf("-speed %v: must be ≥ 0", *speed))
			}
			bal, err := c.balancer()
			if err != nil {
				return usage(err)
			}
			n, err := copyTopic(ctx, strings.Split(c.brokers, ","), *fromTopic, *toTopic, *fromOffset, since, *speed, bal)
			fmt.Fprintf(stderr, "copied %d records from %s to %s\n", n, *fromTopic, *toTopic)
			if err != nil {
				fmt.Fprintf(stderr, "producer: %v\n", err)
				return exitError
			}
			return exitOK
		}
		if *file == "" {
			return usage(errors.New("-file or -from-topic is required"))
		}
		s, err := openFile(*file, streams.CSVOptions{Header: *header, Label: *label, Key: *keyCol, Labels: streams.LabelMap{Positive: *positive, Negative: *negative}},
			streams.JSONLOptions{Dim: *dim, HashBits: *hashBits, KeyField: *keyCol})
		if err != nil {
			if errors.Is(err, streams.ErrOption) {
				return usage(err)
			}
			fmt.Fprintf(stderr, "producer: %v\n", err)
			return exitError
		}
		src = s
	default:
		return usage(fmt.Errorf("unknown mode %q: synth or replay", args[0]))
	}
	if c.keys < 1 || c.labelsDelay < 0 || c.rate < 0 {
		return usage(errors.New("-keys must be ≥ 1, -labels-delay and -rate ≥ 0"))
	}
	if _, err := c.balancer(); err != nil {
		return usage(err)
	}
	n, err := produce(ctx, c, src, stderr)
	fmt.Fprintf(stderr, "produced %d events to %s\n", n, c.topic)
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "producer: %v\n", err)
		return exitError
	}
	return exitOK
}

func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

func openFile(path string, csvOpts streams.CSVOptions, jsonlOpts streams.JSONLOptions) (streams.Source, error) {
	switch p := strings.ToLower(strings.TrimSuffix(path, ".gz")); {
	case strings.HasSuffix(p, ".arff"):
		return streams.OpenARFF(path, streams.ARFFOptions{Label: csvOpts.Label, Labels: csvOpts.Labels})
	case strings.HasSuffix(p, ".jsonl"), strings.HasSuffix(p, ".ndjson"):
		return streams.OpenJSONL(path, jsonlOpts)
	case strings.HasSuffix(p, ".csv"), strings.HasSuffix(p, ".txt"):
		return streams.OpenCSV(path, csvOpts)
	}
	return nil, fmt.Errorf("cannot tell the format of %s: name it .csv, .txt, .arff or .jsonl: %w", path, streams.ErrOption)
}

// produce writes the source's messages (backtest.Messages: the order a
// backtest of the same source replays), pacing at c.rate events a second.
// Label records go to the labels topic when there is one, else in sequence
// with the events. Writes wait for every replica (acks=all): with acks=0
// kafka-go does not wait, and the topic could hold the messages in another
// order or miss some, which a backtest of the same file would not see (a
// backtest test writing without acks lost and reordered records on the
// in-process broker).
func produce(ctx context.Context, c common, src streams.Source, progress io.Writer) (int, error) {
	brokers := strings.Split(c.brokers, ",")
	bal, err := c.balancer()
	if err != nil {
		return 0, err
	}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: c.topic, Balancer: bal, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	var lw *kafka.Writer
	if c.labelsTopic != "" && c.labelsTopic != c.topic {
		lw = &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: c.labelsTopic, Balancer: bal, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
		defer lw.Close()
	}
	var batch, labelBatch []kafka.Message
	flush := func() error {
		if len(batch) > 0 {
			if err := w.WriteMessages(ctx, batch...); err != nil {
				return err
			}
		}
		if len(labelBatch) > 0 {
			if err := lw.WriteMessages(ctx, labelBatch...); err != nil {
				return err
			}
		}
		batch, labelBatch = batch[:0], labelBatch[:0]
		return nil
	}
	start, last := time.Now(), time.Now()
	n := 0
	opts := backtest.MessageOptions{Keys: c.keys, LabelsDelay: c.labelsDelay}
	if lw != nil {
		// Stamped so that the service's merge of the two topics by
		// timestamp takes them in the order they are generated (and a
		// backtest of the same source replays): from an hour back, so that
		// Kafka 4's one-hour bound on timestamps ahead of its clock
		// (message.timestamp.after.max.ms) is far.
		opts.Clock = start.Add(-time.Hour).Truncate(time.Millisecond)
	}
	_, err = backtest.Messages(ctx, src, opts, func(m backtest.Message) error {
		msg := kafka.Message{Key: m.Key, Value: m.Value, Time: m.Time}
		if err := notAhead(ctx, m.Time, flush); err != nil {
			return err
		}
		if m.Labels && lw != nil {
			labelBatch = append(labelBatch, msg)
			return nil
		}
		batch = append(batch, msg)
		if m.Labels {
			return nil
		}
		n++
		if c.rate > 0 {
			if wait := time.Until(start.Add(time.Duration(float64(n) / c.rate * float64(time.Second)))); wait > 0 {
				if err := flush(); err != nil {
					return err
				}
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		if len(batch) >= 500 {
			if err := flush(); err != nil {
				return err
			}
		}
		if time.Since(last) > 2*time.Second {
			last = time.Now()
			fmt.Fprintf(progress, "%d events\n", n)
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	return n, flush()
}

// aheadLimit is how far ahead of the wall clock the producer stamps a
// record at most; past it, it waits. Kafka 4 refuses timestamps more than
// an hour ahead of the broker's clock (message.timestamp.after.max.ms).
const aheadLimit = 50 * time.Minute

// notAhead waits, after flushing what is batched, until at is at most
// aheadLimit ahead of the clock (a zero at does not wait).
func notAhead(ctx context.Context, at time.Time, flush func() error) error {
	wait := time.Until(at.Add(-aheadLimit))
	if at.IsZero() || wait <= 0 {
		return nil
	}
	if err := flush(); err != nil {
		return err
	}
	select {
	case <-time.After(wait):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// replayTwoFiles writes a keyed history kept as two JSONL files: the events
// to the events topic and the labels to the labels topic, in file order,
// each record keyed by its line's key and stamped with its "ts"
// (backtest.FileRecords). It returns the exit code.
func replayTwoFiles(ctx context.Context, c common, events, labels string, opts streams.JSONLOptions, stderr io.Writer) int {
	usage := func(err error) int {
		fmt.Fprintf(stderr, "producer: %v\n", err)
		return exitUsage
	}
	switch {
	case events == "" || !strings.HasSuffix(strings.TrimSuffix(strings.ToLower(events), ".gz"), ".jsonl"):
		return usage(errors.New("-labels-data goes with a JSONL -file of events (.jsonl)"))
	case opts.KeyField == "" || c.labelsTopic == "" || c.labelsTopic == c.topic:
		return usage(errors.New("-labels-data needs -key (the key field of both files) and a -labels-topic other than the events topic"))
	case c.labelsDelay > 0 || c.rate > 0:
		return usage(errors.New("-labels-data: the files say when labels come; -labels-delay and -rate do not apply"))
	}
	bal, err := c.balancer()
	if err != nil {
		return usage(err)
	}
	brokers := strings.Split(c.brokers, ",")
	written := map[bool]int{}
	for _, isLabels := range []bool{false, true} {
		path, topic := events, c.topic
		if isLabels {
			path, topic = labels, c.labelsTopic
		}
		src, err := streams.OpenJSONL(path, opts)
		if err == nil {
			written[isLabels], err = writeFile(ctx, brokers, topic, bal, src, isLabels, stderr)
		}
		if err != nil {
			fmt.Fprintf(stderr, "producer: %s: %v\n", path, err)
			return exitError
		}
	}
	fmt.Fprintf(stderr, "produced %d events to %s and %d label records to %s\n", written[false], c.topic, written[true], c.labelsTopic)
	return exitOK
}

// writeFile writes one file of a two-file history to topic.
func writeFile(ctx context.Context, brokers []string, topic string, bal kafka.Balancer, src streams.Source, labels bool, progress io.Writer) (int, error) {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: bal, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	var batch []kafka.Message
	flush := func() error {
		err := w.WriteMessages(ctx, batch...)
		if errors.Is(err, kafka.InvalidTimestamp) {
			err = fmt.Errorf("%w: the broker refuses record timestamps this far from its clock (message.timestamp.before.max.ms and after.max.ms; Kafka 4 allows an hour ahead)", err)
		}
		batch = batch[:0]
		return err
	}
	last, n := time.Now(), 0
	_, err := backtest.FileRecords(ctx, src, labels, backtest.MessageOptions{}, func(m backtest.Message) error {
		batch = append(batch, kafka.Message{Key: m.Key, Value: m.Value, Time: m.Time})
		if n++; len(batch) == 500 {
			if err := flush(); err != nil {
				return err
			}
		}
		if time.Since(last) > 2*time.Second {
			last = time.Now()
			fmt.Fprintf(progress, "%s: %d records\n", topic, n)
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		err = flush()
	}
	return n, err
}

// copyTopic replays every partition of from into to, keeping keys and
// pacing by the records' timestamps divided by speed (0: no pacing).
func copyTopic(ctx context.Context, brokers []string, from, to string, offset int64, since time.Time, speed float64, bal kafka.Balancer) (int, error) {
	conn, err := kafka.Dial("tcp", brokers[0])
	if err != nil {
		return 0, err
	}
	parts, err := conn.ReadPartitions(from)
	conn.Close()
	if err != nil {
		return 0, fmt.Errorf("topic %s: %w", from, err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: to, Balancer: bal, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	n := 0
	var first time.Time
	start := time.Now()
	for _, p := range parts {
		leader, err := kafka.DialLeader(ctx, "tcp", brokers[0], from, p.ID)
		if err != nil {
			return n, err
		}
		begin := offset
		if !since.IsZero() {
			if o, err := leader.ReadOffset(since); err == nil {
				begin = o
			}
		}
		var msgs []kafka.Message
		pace := func(m kafka.Message) error {
			if first.IsZero() {
				first = m.Time
			}
			if speed > 0 && !m.Time.IsZero() {
				if wait := time.Until(start.Add(time.Duration(float64(m.Time.Sub(first)) / speed))); wait > 0 {
					select {
					case <-time.After(wait):
					case <-ctx.Done():
						return ctx.Err()
					}
				}
			}
			msgs = append(msgs, kafka.Message{Key: m.Key, Value: m.Value, Headers: m.Headers})
			return nil
		}
		// Committed records only (read_committed, as the service reads),
		// up to the last stable offset of the copy's start.
		tr := &kafka.Transport{}
		end, err := kafkaread.StableOffset(ctx, tr, kafka.TCP(brokers...), from, p.ID)
		if err == nil && end > begin {
			cfg := kafkaread.FollowConfig{Topic: from, Partition: p.ID, From: begin, End: end}
			err = kafkaread.Follow(ctx, tr, kafka.TCP(brokers...), cfg, func(batch []kafka.Message, _ int64) error {
				for _, m := range batch {
					if err := pace(m); err != nil {
						return err
					}
				}
				return nil
			})
		}
		tr.CloseIdleConnections()
		if err != nil {
			leader.Close()
			return n, fmt.Errorf("topic %s partition %d: %w", from, p.ID, err)
		}
		leader.Close()
		if len(msgs) > 0 {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				return n, err
			}
			n += len(msgs)
		}
	}
	return n, nil
}
