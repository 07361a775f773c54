// Package config is the service's configuration: one struct read from the
// environment (prefix DRIFTSTREAM_, github.com/kelseyhightower/envconfig),
// overridden by command-line flags generated from the same struct, and
// validated with messages that say what is wrong and how to fix it. The
// README's configuration table is generated from it too (see Markdown), and a
// test keeps the two in sync.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"text/template"
	"time"

	"github.com/driftstream/driftstream/keyed"
	"github.com/kelseyhightower/envconfig"
)

// Prefix is the environment prefix.
const Prefix = "DRIFTSTREAM"

// Config is every setting of the service. Field tags: envconfig's (default,
// split_words), desc (the help text), flag:"-" for secrets that must not be
// given on the command line (they would show in process listings).
type Config struct {
	Brokers                []string      `split_words:"true" desc:"Kafka bootstrap brokers, comma-separated host:port"`
	Group                  string        `default:"driftstream" desc:"consumer group id"`
	EventsTopic            string        `split_words:"true" default:"events" desc:"input events and label records"`
	LabelsTopic            string        `split_words:"true" desc:"optional separate labels topic, co-partitioned with the events topic"`
	PredictionsTopic       string        `split_words:"true" default:"predictions" desc:"predictions output topic"`
	QueriesTopic           string        `split_words:"true" default:"label-queries" desc:"label-queries output topic"`
	DeadLetterTopic        string        `split_words:"true" default:"dead-letters" desc:"dead-letter output topic"`
	ChangelogTopic         string        `split_words:"true" default:"driftstream-changelog" desc:"compacted checkpoint topic"`
	AlertsTopic            string        `split_words:"true" default:"drift-alerts" desc:"drift alerts output topic (keyed by entity key)"`
	Detectors              string        `default:"[{\"detector\":\"adwin\",\"signal\":\"mistakes\",\"params\":{\"delta\":0.00002}}]" desc:"drift detectors run per key, a JSON list of {detector, signal, params}: detectors adwin, ddm, eddm, page-hinkley, hddm-a; signals mistakes, queries, score; [] for none. The default watches the mistakes only: a queries detector helped no learner of the catalog and raised false alerts with several (docs/DETECTION.md); add one for keys whose labels never come"`
	OnDrift                string        `split_words:"true" default:"alert" desc:"on a confirmed drift: alert, or reset (also restart the key's learner)"`
	AlertCooldown          int64         `split_words:"true" default:"500" desc:"a key's events without a detection after which its open drift incident closes (if its signal has not come back near its reference before); detections while an incident is open raise no alert"`
	AlertMinRise           float64       `split_words:"true" default:"0.15" desc:"least rise of a detection's signal (its mean over the key's last 128 values less its mean over the 512 before them) for the detection to open an incident and alert; 0: any rise"`
	AlertResolved          bool          `split_words:"true" default:"false" desc:"also write a record of kind resolved to the alerts topic when a key's drift incident closes"`
	Partitions             int           `default:"0" desc:"partitions of the topics the service creates; 0: the events topic's count (4 when the service creates it too); a count other than an existing events topic's is refused"`
	Replication            int           `default:"1" desc:"replication factor of topics the service creates"`
	Learner                string        `default:"logreg" desc:"learner of every key (see consumer learners); the default, with an additive population model and an intercept, was chosen on public keyed data against River (docs/LEARNING.md)"`
	LearnerParams          string        `split_words:"true" desc:"learner parameters, a JSON object"`
	Dim                    int           `desc:"dimension of dense \"x\" inputs"`
	HashBits               int           `split_words:"true" desc:"hash named \"features\" into 2^k buckets; with Dim too, dense \"x\" fills the first Dim of them"`
	Bias                   bool          `default:"true" desc:"append a constant feature 1 to every input (the learners' dimension is one more), so that linear learners can learn a threshold away from the origin; turning it on or off changes every key's learner, which a restart on the same changelog refuses (deploy it as a new group and changelog)"`
	Seed                   uint64        `default:"1" desc:"global seed; each key's learner draws from (seed, key)"`
	QueryScale             float64       `split_words:"true" default:"1" desc:"margin rule b/(b+|score|) for learners without a query rule; 0 never queries"`
	MaxPending             int           `split_words:"true" default:"1000" desc:"unlabeled events awaiting their label, kept per key (oldest dropped)"`
	PendingTTL             int64         `split_words:"true" default:"1000000" desc:"an awaited label is given up after this many later records of its partition"`
	CheckpointStore        string        `split_words:"true" default:"kafka" desc:"kafka (changelog topic) or file (CheckpointDir, single node)"`
	CheckpointDir          string        `split_words:"true" desc:"directory of the file checkpoint store"`
	CheckpointEvery        int           `split_words:"true" default:"10000" desc:"checkpoint a partition every this many records (or CheckpointPeriod, whichever first)"`
	CheckpointPeriod       time.Duration `split_words:"true" default:"5s" desc:"and at least this often"`
	CheckpointMaxEvery     int           `split_words:"true" default:"0" desc:"a checkpoint due by CheckpointEvery waits, up to this many records (CheckpointPeriod bounds it all the same), while it would write more than one key record per 4 records it absorbs: many keys, each changed once (0: ten times CheckpointEvery; equal to CheckpointEvery: no wait)"`
	FlushInterval          time.Duration `split_words:"true" default:"5ms" desc:"write predictions, queries and alerts this often between checkpoints (0: at checkpoints only)"`
	StateDir               string        `split_words:"true" desc:"local directory for the keys beyond CacheKeys per partition, in a Pebble store rebuilt from the changelog on a restore (an emptyDir will do; one member's alone: stores left there are removed at start, except those ParkState parked); empty: every key in memory"`
	CacheKeys              int           `split_words:"true" default:"100000" desc:"with StateDir: keys per partition held in memory after each checkpoint (plus those changed since)"`
	ParkState              bool          `split_words:"true" default:"false" desc:"with StateDir on a persistent volume: at shutdown, and when a rebalance moves a partition away, park its key store there; when the partition comes back, resume it from there, reading only what other members wrote to the changelog since (restore as usual only when that is gone)"`
	MetricsAddr            string        `split_words:"true" default:":9090" desc:"address of /metrics, /healthz and /readyz"`
	APIAddr                string        `envconfig:"API_ADDR" desc:"address of the /v1/ key API (reads; a key's reset needs DRIFTSTREAM_ADMIN_TOKEN); empty: on DRIFTSTREAM_METRICS_ADDR; off: not served"`
	Pprof                  bool          `default:"false" desc:"serve /debug/pprof on the metrics address"`
	LogLevel               string        `split_words:"true" default:"info" desc:"debug, info, warn or error"`
	LogFormat              string        `split_words:"true" default:"json" desc:"json or text"`
	ShutdownTimeout        time.Duration `split_words:"true" default:"30s" desc:"on SIGTERM: finish, checkpoint and commit within this time"`
	MaxKeyBytes            int64         `split_words:"true" default:"900000" desc:"largest key record in the changelog (keep below the broker's message.max.bytes); a learner that could exceed it is refused at start; -1: no limit (file store)"`
	MaxKeyMemory           int64         `split_words:"true" default:"268435456" desc:"largest learner state of one key in memory, in bytes; checked at start"`
	MaxPendingBytes        int           `split_words:"true" default:"131072" desc:"bytes of awaited events and early labels kept per key (oldest dropped)"`
	MaxAbsValue            float64       `split_words:"true" default:"1e12" desc:"largest magnitude of an input value; larger ones are dead-lettered"`
	MaxEventBytes          int           `split_words:"true" default:"0" desc:"largest input record value in bytes (events and label records); a larger one is dead-lettered (too_large); 0: the input topic's max.message.bytes (the broker's message.max.bytes where the topic does not set it), the largest record it can hold"`
	MaxKeyLength           int           `split_words:"true" default:"4096" desc:"longest record key in bytes; a longer one is dead-lettered (key_too_long) and gets no key state"`
	Isolation              string        `default:"read_committed" desc:"what is read of transactional input records: read_committed (records of committed transactions and those written without one, up to the last stable offset; aborted ones never) or read_uncommitted (every record up to the high watermark, aborted ones too; an open transaction holds nothing back)"`
	MergeWait              time.Duration `split_words:"true" default:"0s" desc:"with a labels topic: how long a partition's merge of the events and labels topics (by record timestamp) waits for a topic that is caught up, for records still to reach the broker, before it goes on without it (counted in driftstream_merge_went_on_total); records already on the broker are always waited for, so the order is the logs' own; 0: no wait; -1ns waits for ever"`
	OnOutputError          string        `split_words:"true" default:"dead-letter" desc:"an output the broker refuses for itself (too large, invalid): dead-letter (replace it with a dead letter and go on) or fail (fail the partition)"`
	Population             string        `default:"additive" desc:"the population model, one per partition: additive (a shared part learned from every label, which each key's prediction adds to its own; logreg, perceptron and second-order learners), mixture or the keys' learner's name (a learner that seeds new keys, followed per key by a weighted majority), or off"`
	LearnFrom              string        `split_words:"true" default:"all" desc:"which labels teach a key: all (every label that reaches it) or queried (only those its learner asked for: the selective-sampling papers' protocol; changes samplers only)"`
	SharedAcrossPartitions bool          `split_words:"true" default:"false" desc:"with population additive: each partition also reads the other partitions of the input topics (merged by record timestamp) and its shared part learns their labeled events, their delayed labels joined to their events, so that one shared part learns every key's labels however many partitions there are; worth points where partitions hold few keys (docs/LEARNING.md); costs each partition the reading and decoding of every partition"`
	Standardize            bool          `default:"false" desc:"z-score each key's inputs by the running statistics of its earlier inputs before its learner sees them (dense inputs; checkpointed with the key)"`
	AwaitedInputs          string        `split_words:"true" default:"events" desc:"where a checkpoint finds the inputs of events awaiting their label: events (the events topic, which a restore re-reads from the oldest of them: a key's changelog record holds none; the topic's retention must outlast the labels' delays, or their labels teach nothing: driftstream_label_inputs_lost_total) or changelog (written with the key at each of its checkpoints while the event waits)"`
	RetryTimeout           time.Duration `split_words:"true" default:"2m" desc:"how long a failing Kafka read, write or commit is retried before its partition fails"`
	FailExitAfter          time.Duration `split_words:"true" default:"30s" desc:"after a partition fails: report it (/readyz 503, metrics) this long, then exit 1"`
	TopicCheckInterval     time.Duration `split_words:"true" default:"30s" desc:"how often the input topics' partition counts are read while running: partitions added meanwhile are reported (unready, driftstream_unread_input_partitions), never silently unread"`
	SessionTimeout         time.Duration `split_words:"true" default:"10s" desc:"consumer-group session timeout: a member silent this long loses its partitions"`
	InstanceID             string        `split_words:"true" desc:"this member's identity across restarts, unique in the group (the Helm chart sets the pod's name): at start, the group membership a former process with the same one left (killed without leaving) is removed, so its partitions move at once instead of after the session timeout; empty: off"`
	TLS                    bool          `default:"false" desc:"connect to Kafka with TLS"`
	TLSCAFile              string        `envconfig:"TLS_CA_FILE" flag:"tls-ca-file" desc:"PEM CA bundle to verify the brokers (default: system roots)"`
	TLSCertFile            string        `envconfig:"TLS_CERT_FILE" desc:"PEM client certificate (mutual TLS)"`
	TLSKeyFile             string        `envconfig:"TLS_KEY_FILE" desc:"PEM client key (mutual TLS)"`
	TLSServerName          string        `envconfig:"TLS_SERVER_NAME" desc:"expected broker certificate name (default: the host dialed)"`
	SASLMechanism          string        `envconfig:"SASL_MECHANISM" default:"none" desc:"none, plain, scram-sha-256 or scram-sha-512"`
	SASLUsername           string        `envconfig:"SASL_USERNAME" desc:"SASL user"`
	SASLPassword           string        `envconfig:"SASL_PASSWORD" flag:"-" desc:"SASL password (environment only; never logged)"`
	SASLPasswordFile       string        `envconfig:"SASL_PASSWORD_FILE" desc:"file holding the SASL password (for mounted secrets)"`
	AdminToken             string        `envconfig:"ADMIN_TOKEN" flag:"-" desc:"bearer token that enables the API's write calls (POST /v1/keys/{key}/reset); unset: read-only (environment only; never logged)"`
}

// Load reads the environment, then the flags in args (which override it).
// fs receives the generated flags; extra flags may be defined on it first.
func Load(fs *flag.FlagSet, args []string) (Config, error) {
	var c Config
	if err := envconfig.Process(Prefix, &c); err != nil {
		return c, fmt.Errorf("environment: %v", err)
	}
	if err := register(fs, &c); err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.Brokers = splitList(strings.Join(c.Brokers, ",")) // envconfig keeps the spaces of "a:1, b:2"
	return c, nil
}

// register defines one flag per field, defaulting to the field's current
// (environment) value.
func register(fs *flag.FlagSet, c *Config) error {
	v := reflect.ValueOf(c).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Tag.Get("flag") == "-" {
			continue
		}
		field := v.Field(i)
		name := fieldFlag(f)
		usage := f.Tag.Get("desc") + " (env " + EnvName(f) + ")"
		switch p := field.Addr().Interface().(type) {
		case *string:
			fs.StringVar(p, name, *p, usage)
		case *int:
			fs.IntVar(p, name, *p, usage)
		case *int64:
			fs.Int64Var(p, name, *p, usage)
		case *uint64:
			fs.Uint64Var(p, name, *p, usage)
		case *float64:
			fs.Float64Var(p, name, *p, usage)
		case *bool:
			fs.BoolVar(p, name, *p, usage)
		case *time.Duration:
			fs.DurationVar(p, name, *p, usage)
		case *[]string:
			fs.Func(name, usage, func(s string) error {
				*p = splitList(s)
				return nil
			})
		default:
			return fmt.Errorf("config field %s: unsupported type %s", f.Name, f.Type)
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// fieldFlag is a field's flag name: its flag tag, or FlagName of its name.
func fieldFlag(f reflect.StructField) string {
	if n := f.Tag.Get("flag"); n != "" && n != "-" {
		return n
	}
	return FlagName(f.Name)
}

// FlagName turns a field name into a flag: CheckpointEvery → checkpoint-every.
func FlagName(field string) string {
	var b strings.Builder
	rs := []rune(field)
	for i, r := range rs {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 && (!(rs[i-1] >= 'A' && rs[i-1] <= 'Z') || (i+1 < len(rs) && rs[i+1] >= 'a' && rs[i+1] <= 'z')) {
			b.WriteByte('-')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}

// EnvName is the environment variable of a field, as envconfig reads it.
func EnvName(f reflect.StructField) string {
	if n := f.Tag.Get("envconfig"); n != "" {
		return Prefix + "_" + n
	}
	if f.Tag.Get("split_words") == "true" {
		return Prefix + "_" + strings.ToUpper(strings.ReplaceAll(FlagName(f.Name), "-", "_"))
	}
	return Prefix + "_" + strings.ToUpper(f.Name)
}

// Validate checks the configuration; every message says how to fix it.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(c.Brokers) == 0 {
		bad("no brokers: set DRIFTSTREAM_BROKERS or -brokers to host:port[,host:port]")
	}
	for _, b := range c.Brokers {
		if _, port, ok := strings.Cut(b, ":"); !ok || port == "" {
			bad("broker %q has no port: write host:port", b)
		}
	}
	if c.Dim <= 0 && c.HashBits <= 0 {
		bad("set DRIFTSTREAM_DIM (dense \"x\" inputs), DRIFTSTREAM_HASH_BITS (named \"features\"), or both (both kinds)")
	}
	if c.Dim > 0 && c.HashBits > 0 && c.HashBits < 31 && c.Dim > 1<<c.HashBits {
		bad("DRIFTSTREAM_DIM=%d is more than the 2^%d hash buckets: with both set, dense \"x\" fills the first DRIFTSTREAM_DIM buckets", c.Dim, c.HashBits)
	}
	if c.LearnerParams != "" && !json.Valid([]byte(c.LearnerParams)) {
		bad("DRIFTSTREAM_LEARNER_PARAMS is not valid JSON: write an object such as {\"c\": 50}")
	}
	if c.Partitions < 0 || c.Replication < 1 {
		bad("DRIFTSTREAM_PARTITIONS must be ≥ 0 (0: the events topic's count) and DRIFTSTREAM_REPLICATION ≥ 1")
	}
	switch c.CheckpointStore {
	case "kafka":
	case "file":
		if c.CheckpointDir == "" {
			bad("DRIFTSTREAM_CHECKPOINT_STORE=file needs DRIFTSTREAM_CHECKPOINT_DIR")
		}
	default:
		bad("DRIFTSTREAM_CHECKPOINT_STORE=%q: use kafka or file", c.CheckpointStore)
	}
	if c.CheckpointEvery < 1 || c.CheckpointPeriod <= 0 || c.ShutdownTimeout <= 0 {
		bad("DRIFTSTREAM_CHECKPOINT_EVERY, DRIFTSTREAM_CHECKPOINT_PERIOD and DRIFTSTREAM_SHUTDOWN_TIMEOUT must be positive")
	}
	if c.CheckpointMaxEvery < 0 || c.CheckpointMaxEvery != 0 && c.CheckpointMaxEvery < c.CheckpointEvery {
		bad("DRIFTSTREAM_CHECKPOINT_MAX_EVERY=%d: must be 0 (ten times DRIFTSTREAM_CHECKPOINT_EVERY) or at least DRIFTSTREAM_CHECKPOINT_EVERY=%d (equal: no wait)", c.CheckpointMaxEvery, c.CheckpointEvery)
	}
	if c.StateDir != "" && c.CacheKeys < 1 {
		bad("DRIFTSTREAM_CACHE_KEYS=%d: must be ≥ 1 with DRIFTSTREAM_STATE_DIR", c.CacheKeys)
	}
	if c.ParkState && c.StateDir == "" {
		bad("DRIFTSTREAM_PARK_STATE needs DRIFTSTREAM_STATE_DIR (the volume the key stores are parked on)")
	}
	if c.ParkState && c.CheckpointStore == "file" {
		bad("DRIFTSTREAM_PARK_STATE needs the kafka checkpoint store: the file store does not report where its records land, which resuming a parked state checks")
	}
	if c.FlushInterval < 0 {
		bad("DRIFTSTREAM_FLUSH_INTERVAL=%s: must be ≥ 0 (0: outputs at checkpoints only)", c.FlushInterval)
	}
	if c.TopicCheckInterval <= 0 {
		bad("DRIFTSTREAM_TOPIC_CHECK_INTERVAL=%s: must be positive", c.TopicCheckInterval)
	}
	if c.RetryTimeout <= 0 || c.FailExitAfter <= 0 || c.SessionTimeout <= 0 {
		bad("DRIFTSTREAM_RETRY_TIMEOUT, DRIFTSTREAM_FAIL_EXIT_AFTER and DRIFTSTREAM_SESSION_TIMEOUT must be positive")
	}
	if c.MaxEventBytes < 0 {
		bad("DRIFTSTREAM_MAX_EVENT_BYTES=%d: must be ≥ 0 (0: the input topic's max.message.bytes)", c.MaxEventBytes)
	}
	if c.MaxKeyLength <= 0 {
		bad("DRIFTSTREAM_MAX_KEY_LENGTH=%d: must be positive", c.MaxKeyLength)
	}
	if c.Isolation != "read_committed" && c.Isolation != "read_uncommitted" {
		bad("DRIFTSTREAM_ISOLATION=%q: use read_committed or read_uncommitted", c.Isolation)
	}
	if c.OnOutputError != "dead-letter" && c.OnOutputError != "fail" {
		bad("DRIFTSTREAM_ON_OUTPUT_ERROR=%q: use dead-letter or fail", c.OnOutputError)
	}
	if c.MaxKeyMemory <= 0 || c.MaxPendingBytes <= 0 || !(c.MaxAbsValue > 0) || c.MaxKeyBytes == 0 {
		bad("DRIFTSTREAM_MAX_KEY_MEMORY, DRIFTSTREAM_MAX_PENDING_BYTES and DRIFTSTREAM_MAX_ABS_VALUE must be positive, DRIFTSTREAM_MAX_KEY_BYTES positive or -1")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("DRIFTSTREAM_LOG_LEVEL=%q: use debug, info, warn or error", c.LogLevel)
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		bad("DRIFTSTREAM_LOG_FORMAT=%q: use json or text", c.LogFormat)
	}
	switch c.SASLMechanism {
	case "none":
		if c.SASLUsername != "" || c.SASLPassword != "" || c.SASLPasswordFile != "" {
			bad("SASL credentials given but DRIFTSTREAM_SASL_MECHANISM=none: set plain, scram-sha-256 or scram-sha-512")
		}
	case "plain", "scram-sha-256", "scram-sha-512":
		if c.SASLUsername == "" {
			bad("DRIFTSTREAM_SASL_MECHANISM=%s needs DRIFTSTREAM_SASL_USERNAME", c.SASLMechanism)
		}
		if (c.SASLPassword == "") == (c.SASLPasswordFile == "") {
			bad("set exactly one of DRIFTSTREAM_SASL_PASSWORD and DRIFTSTREAM_SASL_PASSWORD_FILE")
		}
	default:
		bad("DRIFTSTREAM_SASL_MECHANISM=%q: use none, plain, scram-sha-256 or scram-sha-512", c.SASLMechanism)
	}
	if !c.TLS && (c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSKeyFile != "" || c.TLSServerName != "") {
		bad("TLS files or server name given but DRIFTSTREAM_TLS=false: set DRIFTSTREAM_TLS=true")
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		bad("mutual TLS needs both DRIFTSTREAM_TLS_CERT_FILE and DRIFTSTREAM_TLS_KEY_FILE")
	}
	for _, f := range []string{c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile, c.SASLPasswordFile} {
		if f != "" {
			if _, err := os.Stat(f); err != nil {
				bad("cannot read %s: %v", f, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Password returns the SASL password from the environment or its file,
// trimming a trailing newline from files.
func (c *Config) Password() (string, error) {
	if c.SASLPasswordFile == "" {
		return c.SASLPassword, nil
	}
	b, err := os.ReadFile(c.SASLPasswordFile)
	if err != nil {
		return "", fmt.Errorf("read the SASL password file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// Redacted returns the configuration as JSON for logs, secrets masked.
func (c Config) Redacted() string {
	c = c.redact()
	b, _ := json.Marshal(c)
	return string(b)
}

// redact hides the secrets.
func (c Config) redact() Config {
	if c.SASLPassword != "" {
		c.SASLPassword = "***"
	}
	if c.AdminToken != "" {
		c.AdminToken = "***"
	}
	return c
}

// LogValue logs the configuration as one attribute per setting, secrets
// redacted (slog.LogValuer), so that a JSON log carries it as an object
// rather than as an escaped string.
func (c Config) LogValue() slog.Value {
	c = c.redact()
	v := reflect.ValueOf(c)
	attrs := make([]slog.Attr, 0, v.NumField())
	for i := range v.NumField() {
		f := v.Type().Field(i)
		val := v.Field(i).Interface()
		if d, ok := val.(time.Duration); ok {
			val = d.String()
		}
		attrs = append(attrs, slog.Any(fieldFlag(f), val))
	}
	return slog.GroupValue(attrs...)
}

// Markdown renders the configuration table of the README.
func Markdown() string {
	t := reflect.TypeOf(Config{})
	var b bytes.Buffer
	b.WriteString("| environment variable | flag | default | meaning |\n|---|---|---|---|\n")
	rows := template.Must(template.New("row").Parse("| `{{.Env}}` | {{.Flag}} | {{.Default}} | {{.Desc}} |\n"))
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		flagName := "`-" + fieldFlag(f) + "`"
		if f.Tag.Get("flag") == "-" {
			flagName = "(none: secret)"
		}
		def := f.Tag.Get("default")
		if def == "" {
			def = "–"
		} else {
			def = "`" + def + "`"
		}
		rows.Execute(&b, map[string]string{"Env": EnvName(f), "Flag": flagName, "Default": def,
			"Desc": strings.ReplaceAll(f.Tag.Get("desc"), "|", `\|`)})
	}
	return b.String()
}

// DefaultDetectors are the drift detectors the service runs when
// DRIFTSTREAM_DETECTORS is not set (the backtests' default too): the
// Detectors field's default, parsed.
func DefaultDetectors() []keyed.DetectorSpec {
	f, _ := reflect.TypeOf(Config{}).FieldByName("Detectors")
	var specs []keyed.DetectorSpec
	if err := json.Unmarshal([]byte(f.Tag.Get("default")), &specs); err != nil {
		panic(fmt.Sprintf("config: the Detectors default is not a JSON list: %v", err)) // a build that cannot start
	}
	return specs
}
