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
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/driftstream/driftstream/checkpoint"
	"github.com/driftstream/driftstream/config"
	"github.com/driftstream/driftstream/internal/kafkaread"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/service"
	"github.com/driftstream/driftstream/topics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// runService is the default subcommand: the Kafka service, configured by
// DRIFTSTREAM_* environment variables and flags (which override them), or
// with -embedded an in-process broker, a demo producer and the service.
func runService(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f runFlags
	f.register(fs)
	cfg, err := config.Load(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "consumer: %v\n", err)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "consumer: %v\n", err)
		if errors.As(err, new(usageError)) {
			return exitUsage
		}
		return exitError
	}
	if fs.NArg() > 0 {
		return fail(usageError{fmt.Errorf("unexpected arguments %q", fs.Args())})
	}
	if f.embedded {
		cluster, err := startEmbedded(&cfg, f.embeddedAddr, stderr)
		if err != nil {
			return fail(err)
		}
		defer cluster.Close()
	} else if f.demoEvents > 0 {
		return fail(usageError{errors.New("-demo-events needs -embedded")})
	}
	if err := cfg.Validate(); err != nil {
		return fail(usageError{fmt.Errorf("invalid configuration:\n  %s", strings.ReplaceAll(err.Error(), "\n", "\n  "))})
	}
	log := newLogger(cfg, stderr)
	log.Info("starting", "config", cfg)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	scfg, err := serviceConfig(cfg, reg, log, f.embedded)
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	svc, err := service.New(ctx, scfg)
	if err != nil && ctx.Err() != nil {
		// SIGTERM or SIGINT while starting (a rollout that changed its mind,
		// a shutdown during topic setup): nothing ran, nothing is lost.
		log.Info("stopped by a signal while starting", "during", err.Error())
		return exitOK
	}
	if err != nil {
		return fail(err)
	}
	closeEndpoints, err := serveEndpoints(cfg, reg, svc, log)
	if err != nil {
		return fail(err)
	}
	defer closeEndpoints()
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if f.embedded && f.demo {
		go func() {
			if err := demoProducer(runCtx, scfg, f.demoKeys, f.demoEvents, f.demoRate, cfg.HashBits > 0, cfg.Seed); err != nil && runCtx.Err() == nil {
				log.Error("demo producer stopped", "error", err)
			}
		}()
	}
	r := supervisor{svc: svc, cancel: cancel, timeout: cfg.ShutdownTimeout, log: log, stdout: stdout, stderr: stderr, demoEvents: f.demoEvents,
		progress: f.embedded || cfg.LogFormat == "text"}
	if err := r.run(ctx, runCtx); err != nil {
		return fail(err)
	}
	return exitOK
}

// runFlags are the run command's flags besides the configuration's.
type runFlags struct {
	embedded     bool
	embeddedAddr string
	demoEvents   int
	demoKeys     int
	demo         bool
	demoRate     float64
}

// register defines the flags on fs.
func (f *runFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.embedded, "embedded", false, "start an in-process Kafka broker and a demo producer: no setup needed")
	fs.StringVar(&f.embeddedAddr, "embedded-addr", "127.0.0.1:9092", "where the embedded broker listens (any Kafka client can connect)")
	fs.IntVar(&f.demoEvents, "demo-events", 0, "with -embedded: stop after this many events are processed and print a JSON summary (0: run until interrupted)")
	fs.IntVar(&f.demoKeys, "demo-keys", 200, "with -embedded: number of entities in the demo stream")
	fs.BoolVar(&f.demo, "demo", true, "with -embedded: run the demo producer (-demo=false leaves the topics to your own producer)")
	fs.Float64Var(&f.demoRate, "demo-rate", 2000, "with -embedded: demo events per second (0: as fast as possible; the in-process broker keeps every record in memory)")
}

// startEmbedded starts the in-process broker on addr and points cfg at it
// (with the demo's dimension unless cfg sets one).
func startEmbedded(cfg *config.Config, addr string, stderr io.Writer) (*kfake.Cluster, error) {
	if len(cfg.Brokers) > 0 {
		return nil, usageError{errors.New("-brokers and -embedded exclude each other: -embedded runs its own broker on -embedded-addr")}
	}
	if cfg.Dim == 0 && cfg.HashBits == 0 {
		cfg.Dim = demoDim
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageError{fmt.Errorf("-embedded-addr %s: %v (choose a free address, e.g. -embedded-addr 127.0.0.1:19092)", addr, err)}
	}
	// The broker compacts the changelog and drops what the stream topics
	// hold past embeddedRetention, so that memory stays flat however long
	// the demo runs.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(func(string, string) (net.Listener, error) { return ln, nil }),
		kfake.BrokerConfigs(embeddedBrokerConfigs()))
	if err != nil {
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	cfg.Brokers = []string{cluster.ListenAddrs()[0]}
	limit := "GOMEMLIMIT=" + os.Getenv("GOMEMLIMIT")
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(embeddedMemoryLimit)
		limit = fmt.Sprintf("a soft memory limit of %d MiB (set GOMEMLIMIT to change it)", embeddedMemoryLimit>>20)
	}
	fmt.Fprintf(stderr, "embedded Kafka broker listening on %s; it keeps the last %s of each topic and the latest state per key; %s\n", cfg.Brokers[0], embeddedRetention, limit)
	return cluster, nil
}

// serviceConfig is the service's configuration from cfg, its metrics
// registered on reg.
func serviceConfig(cfg config.Config, reg *prometheus.Registry, log *slog.Logger, embedded bool) (service.Config, error) {
	pcfg, err := pipelineConfig(cfg)
	if err != nil {
		return service.Config{}, usageError{err}
	}
	dialer, transport, err := cfg.Kafka()
	if err != nil {
		return service.Config{}, usageError{err}
	}
	metrics, err := service.NewMetrics(reg)
	if err != nil {
		return service.Config{}, fmt.Errorf("metrics: %w", err)
	}
	reg.MustRegister(service.NewBuildInfo(version, commit))
	scfg := service.Config{Brokers: cfg.Brokers, Dialer: dialer, Transport: transport, Group: cfg.Group, Partitions: cfg.Partitions, Replication: cfg.Replication,
		Topics: service.Topics{Events: cfg.EventsTopic, Labels: cfg.LabelsTopic, Predictions: cfg.PredictionsTopic, Queries: cfg.QueriesTopic,
			DeadLetters: cfg.DeadLetterTopic, Alerts: cfg.AlertsTopic, Changelog: cfg.ChangelogTopic},
		Pipeline:        pcfg,
		CheckpointEvery: cfg.CheckpointEvery, CheckpointMaxEvery: cfg.CheckpointMaxEvery, CheckpointPeriod: cfg.CheckpointPeriod, FlushInterval: cfg.FlushInterval, Logger: log, Metrics: metrics,
		Retry:         pipeline.Backoff{Initial: pipeline.DefaultBackoff.Initial, Max: pipeline.DefaultBackoff.Max, Timeout: cfg.RetryTimeout},
		FailExitAfter: cfg.FailExitAfter, FinalTimeout: cfg.ShutdownTimeout, SessionTimeout: cfg.SessionTimeout, InstanceID: cfg.InstanceID, TopicCheckInterval: cfg.TopicCheckInterval,
		StateDir: cfg.StateDir, CacheKeys: cfg.CacheKeys, ParkState: cfg.ParkState, OnOutputError: cfg.OnOutputError}
	scfg.Isolation, _ = kafkaread.ParseIsolation(cfg.Isolation) // checked by cfg.Validate
	scfg.MergeWait = cfg.MergeWait
	if embedded { // the service creates the demo's topics keeping only embeddedRetention
		scfg.StreamTopicConfig = map[string]string{"retention.ms": strconv.FormatInt(embeddedRetention.Milliseconds(), 10)}
	}
	if cfg.CheckpointStore == "file" {
		st, err := checkpoint.NewFileStore(cfg.CheckpointDir, 0)
		if err != nil {
			return service.Config{}, usageError{err}
		}
		scfg.Store = st
	}
	return scfg, nil
}

// serveEndpoints serves /metrics, /healthz, /readyz and the /v1/ API (on
// the metrics address, on DRIFTSTREAM_API_ADDR, or not at all), and returns
// what closes them.
func serveEndpoints(cfg config.Config, reg *prometheus.Registry, svc *service.Service, log *slog.Logger) (stop func(), err error) {
	api := service.API(svc, cfg.AdminToken)
	opsAPI := api // on the metrics address unless DRIFTSTREAM_API_ADDR says otherwise
	if cfg.APIAddr != "" {
		opsAPI = nil
	}
	ops, opsAddr, err := serveOps(cfg.MetricsAddr, reg, svc.Ready, opsAPI, cfg.Pprof)
	if err != nil {
		return nil, usageError{fmt.Errorf("metrics address %s: %v", cfg.MetricsAddr, err)}
	}
	switch cfg.APIAddr {
	case "":
		log.Info("serving /metrics, /healthz, /readyz and the /v1/ API", "addr", opsAddr, "api_writes", cfg.AdminToken != "")
	case "off":
		log.Info("serving /metrics, /healthz and /readyz; the /v1/ API is off", "addr", opsAddr)
	default:
		apiSrv, apiAddr, err := serveAPI(cfg.APIAddr, api)
		if err != nil {
			ops.Close()
			return nil, usageError{fmt.Errorf("API address %s: %v", cfg.APIAddr, err)}
		}
		log.Info("serving /metrics, /healthz and /readyz", "addr", opsAddr)
		log.Info("serving the /v1/ API", "addr", apiAddr, "api_writes", cfg.AdminToken != "")
		return func() { apiSrv.Close(); ops.Close() }, nil
	}
	return func() { ops.Close() }, nil
}

// supervisor runs the service until it ends, a signal stops it, or the
// demo processed demoEvents; it prints progress for a person at a terminal.
type supervisor struct {
	svc        *service.Service
	cancel     context.CancelFunc // stops svc.Run
	timeout    time.Duration      // DRIFTSTREAM_SHUTDOWN_TIMEOUT
	log        *slog.Logger
	stdout     io.Writer // the demo's JSON summary
	stderr     io.Writer // progress lines
	demoEvents int
	// progress prints a plain-text line every two seconds: for the
	// embedded demo and text logs. A JSON log is for machines; the metrics
	// carry the same counters.
	progress bool
	done     chan error
}

// run runs the service on runCtx until signals (ctx) stop it.
func (r *supervisor) run(ctx, runCtx context.Context) error {
	r.done = make(chan error, 1)
	start := time.Now()
	go func() { r.done <- r.svc.Run(runCtx) }()
	var progress <-chan time.Time
	if r.progress {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		progress = tick.C
	}
	for {
		select {
		case err := <-r.done:
			return err
		case <-ctx.Done():
			return r.shutdown()
		case <-progress:
			t := r.svc.Totals()
			fmt.Fprintf(r.stderr, "%6.1fs  events %d  predictions %d  label queries %d  labels joined %d  dead letters %d  accuracy %.3f\n",
				time.Since(start).Seconds(), t.Events, t.Predictions, t.Queries, t.LabelsJoined, t.DeadLetters, accuracy(t))
		case <-time.After(20 * time.Millisecond):
			if t := r.svc.Totals(); r.demoEvents > 0 && t.Events+t.DeadLetters >= int64(r.demoEvents) {
				elapsed := time.Since(start).Seconds()
				if err := r.shutdown(); err != nil {
					return err
				}
				t := r.svc.Totals()
				return json.NewEncoder(r.stdout).Encode(map[string]any{"events": t.Events, "predictions": t.Predictions, "label_queries": t.Queries,
					"labels_joined": t.LabelsJoined, "dead_letters": t.DeadLetters, "accuracy": accuracy(t), "events_per_sec": float64(t.Events) / elapsed})
			}
		}
	}
}

// shutdown stops fetching, lets every partition checkpoint and commit, and
// fails if that takes longer than the configured deadline.
func (r *supervisor) shutdown() error {
	r.cancel()
	select {
	case err := <-r.done:
		if err == nil {
			r.log.Info("stopped cleanly", "totals", r.svc.Totals())
		}
		return err
	case <-time.After(r.timeout):
		return fmt.Errorf("shutdown took longer than %s (DRIFTSTREAM_SHUTDOWN_TIMEOUT); the last checkpoints may be incomplete and will be replayed", r.timeout)
	}
}

// minRise is keyed.Settings.AlertMinRise for a command's minimum rise, where 0
// means none.
func minRise(v float64) float64 {
	if v == 0 {
		return keyed.NoMinRise
	}
	return v
}

// The embedded broker's retention of the stream topics, and how often it
// applies it and compacts the changelog.
const (
	embeddedRetention  = 30 * time.Second
	embeddedCleanEvery = 5 * time.Second
	// embeddedSegment bounds what retention cannot free: the broker drops
	// whole segments only, and its default segment (100 MB per partition,
	// held in memory) would keep many minutes of the stream past retention.
	embeddedSegment = 2 << 20
	// embeddedMemoryLimit is the Go runtime's soft memory limit in embedded
	// mode (unless GOMEMLIMIT is set): the broker's records, not the
	// service, are most of the heap, and without a limit the collector lets
	// the heap grow to twice what is live.
	embeddedMemoryLimit = 200 << 20
)

// embeddedBrokerConfigs makes the in-process broker forget what the demo no
// longer needs: it cleans every embeddedCleanEvery, in segments small enough
// that retention frees memory as it goes.
func embeddedBrokerConfigs() map[string]string {
	return map[string]string{
		"log.cleaner.backoff.ms": strconv.FormatInt(embeddedCleanEvery.Milliseconds(), 10),
		"log.segment.bytes":      strconv.Itoa(embeddedSegment),
	}
}

// pipelineConfig is the workers' configuration, validated: the learner's
// per-key state is sized against the memory and message limits before
// anything is allocated.
func pipelineConfig(cfg config.Config) (pipeline.Config, error) {
	vec, err := topics.NewVectorizer(cfg.Dim, cfg.HashBits)
	if err != nil {
		return pipeline.Config{}, err
	}
	if cfg.Bias {
		vec = vec.WithBias()
	}
	p := pipeline.Config{
		Settings:     keyed.Settings{Learner: cfg.Learner, Seed: cfg.Seed, Vector: vec, QueryScale: cfg.QueryScale, MaxPending: cfg.MaxPending, PendingTTL: cfg.PendingTTL, MaxPendingBytes: cfg.MaxPendingBytes},
		TopicNames:   [2]string{cfg.EventsTopic, cfg.LabelsTopic},
		MaxKeyBytes:  cfg.MaxKeyBytes,
		MaxKeyMemory: cfg.MaxKeyMemory,
		MaxAbsValue:  cfg.MaxAbsValue,
		MaxKeyLength: cfg.MaxKeyLength,
		MaxBytes:     cfg.MaxEventBytes}
	if cfg.LearnerParams != "" {
		p.Params = json.RawMessage(cfg.LearnerParams)
	}
	if err := json.Unmarshal([]byte(cfg.Detectors), &p.Detectors); err != nil {
		return pipeline.Config{}, fmt.Errorf("DRIFTSTREAM_DETECTORS must be a JSON list such as [{\"detector\":\"adwin\",\"signal\":\"mistakes\"}]: %v", err)
	}
	if cfg.AlertMinRise < 0 {
		return pipeline.Config{}, fmt.Errorf("DRIFTSTREAM_ALERT_MIN_RISE %v: must be in [0, 1); 0 lets any rise alert", cfg.AlertMinRise)
	}
	p.OnDrift, p.AlertCooldown, p.AlertMinRise, p.AlertResolved = cfg.OnDrift, cfg.AlertCooldown, minRise(cfg.AlertMinRise), cfg.AlertResolved
	p.Standardize = cfg.Standardize
	p.Population = cfg.Population
	p.LearnFrom = cfg.LearnFrom
	p.SharedAcrossPartitions = cfg.SharedAcrossPartitions
	p.AwaitedInputs = cfg.AwaitedInputs
	return p.WithDefaults(), p.Validate()
}

// newLogger is the structured logger of the configured level and format.
func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(cfg.LogLevel)) // validated
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// serveOps serves /metrics, /healthz (alive), /readyz (every assigned
// partition restored and none failed; otherwise 503 with the reason), the
// API under /v1/ and, when asked, /debug/pprof.
func serveOps(addr string, reg *prometheus.Registry, ready func() (bool, string), api http.Handler, withPprof bool) (*http.Server, string, error) {
	mux := http.NewServeMux()
	if api != nil {
		mux.Handle("/v1/", api)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, reason := ready(); !ok {
			http.Error(w, reason, http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return listenAndServe(addr, mux)
}

// serveAPI serves the key API (service.API) alone under /v1/ on addr
// (DRIFTSTREAM_API_ADDR): a port of its own, for a NetworkPolicy or a
// Service apart from the metrics.
func serveAPI(addr string, api http.Handler) (*http.Server, string, error) {
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	return listenAndServe(addr, mux)
}

// listenAndServe serves h on addr in the background, returning the server
// and the address it listens on (":0" picks a free port).
func listenAndServe(addr string, h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return srv, ln.Addr().String(), nil
}

func accuracy(t service.Totals) float64 {
	if t.Labeled == 0 {
		return 0
	}
	return 1 - float64(t.Mistakes)/float64(t.Labeled)
}

// demoDim is the dimension of the demo stream.
const demoDim = 10

// demoProducer writes a drifting stream for many keys, at rate events a
// second (0: unpaced), as named features when named: each key's target
// hyperplane switches every 2,000 of its events; half the events carry their
// label, the others are answered when the service asks for the label (read
// from the label-queries topic) by a label record sent 50 ms later.
func demoProducer(ctx context.Context, cfg service.Config, keys, total int, rate float64, named bool, seed uint64) error {
	bal, err := topics.Balancer(topics.DefaultPartitioner) // cmd/producer's too
	if err != nil {
		return err
	}
	// Acks from every in-sync replica, as cmd/producer: kafka-go's default
	// (none) can lose and reorder records without an error.
	w := &kafka.Writer{Addr: kafka.TCP(cfg.Brokers...), Topic: cfg.Topics.Events, Balancer: bal, BatchTimeout: 2 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	start := time.Now()
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
			ev := topics.Event{ID: id, X: x}
			if named { // with -hash-bits the service reads named features
				ev.X, ev.Features = nil, map[string]float64{}
				for d, v := range x {
					ev.Features[fmt.Sprintf("f%d", d)] = v
				}
			}
			if r.IntN(2) == 0 {
				ev.Label = y
			} else {
				truth.put(id, key, y)
			}
			batch = append(batch, kafka.Message{Key: []byte(key), Value: ev.AppendJSON(nil)})
		}
		if err := w.WriteMessages(ctx, batch...); err != nil {
			return err
		}
		if rate > 0 { // pace: the in-process broker keeps every record in memory
			if wait := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return nil
				}
			}
		}
	}
	<-ctx.Done()
	return nil
}

// truth remembers the labels of the demo's unlabeled events until asked, or
// until truthSpan more have been put: the service asks when it processes
// an event, so an old unasked label will never be asked for, and a map of
// them all would grow with the stream.
type truth struct {
	mu          sync.Mutex
	labels, old map[string]labelOf
}

// truthSpan is how many unlabeled events truth remembers at least (a minute
// at the demo's default rate).
const truthSpan = 60_000

type labelOf struct {
	key   string
	label int
}

func newTruth() *truth { return &truth{labels: map[string]labelOf{}} }

func (t *truth) put(id, key string, y int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.labels) >= truthSpan { // forget the generation before last
		t.old, t.labels = t.labels, make(map[string]labelOf, truthSpan)
	}
	t.labels[id] = labelOf{key, y}
}

func (t *truth) take(id string) (labelOf, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.labels[id]
	if ok {
		delete(t.labels, id)
		return l, true
	}
	l, ok = t.old[id]
	delete(t.old, id)
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
		var q topics.LabelQuery
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
			w.WriteMessages(ctx, kafka.Message{Key: []byte(l.key), Value: topics.Event{Kind: topics.LabelRecord, ID: q.ID, Label: l.label}.AppendJSON(nil)})
		}()
	}
}
