package config

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/service"
)

func load(t *testing.T, env map[string]string, args ...string) (Config, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return Load(fs, args)
}

func TestFlagsOverrideEnvironment(t *testing.T) {
	c, err := load(t, map[string]string{"DRIFTSTREAM_BROKERS": "a:1, b:2", "DRIFTSTREAM_CHECKPOINT_EVERY": "5", "DRIFTSTREAM_DIM": "3"},
		"-checkpoint-every", "7", "-checkpoint-period", "2s")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Brokers, []string{"a:1", "b:2"}) || c.CheckpointEvery != 7 || c.CheckpointPeriod != 2*time.Second || c.Dim != 3 || c.Group != "driftstream" {
		t.Fatalf("%+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, nil, "-sasl-password", "x"); err == nil {
		t.Fatal("a password flag exists: secrets must come from the environment or a file")
	}
}

// Every documented environment variable is the one envconfig reads.
func TestEnvNamesAreRead(t *testing.T) {
	typ := reflect.TypeOf(Config{})
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		sample := map[reflect.Kind]string{reflect.String: "x", reflect.Int: "3", reflect.Int64: "3", reflect.Uint64: "3",
			reflect.Float64: "2.5", reflect.Bool: "true", reflect.Slice: "h:1"}[f.Type.Kind()]
		if f.Type == reflect.TypeOf(time.Duration(0)) {
			sample = "3m"
		}
		want := map[string]string{"x": "x", "3": "3", "2.5": "2.5", "true": "true", "h:1": "[h:1]", "3m": "3m0s"}[sample]
		t.Run(f.Name, func(t *testing.T) {
			c, err := load(t, map[string]string{EnvName(f): sample})
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(reflect.ValueOf(c).Field(i).Interface()); got != want {
				t.Fatalf("%s=%s gave %s = %s", EnvName(f), sample, f.Name, got)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("s3cret\n"), 0o600)
	good := map[string]string{"DRIFTSTREAM_BROKERS": "k:9092", "DRIFTSTREAM_DIM": "3"}
	tests := []struct {
		env  map[string]string
		frag string
	}{
		{map[string]string{"DRIFTSTREAM_DIM": "3"}, "no brokers"},
		{map[string]string{"DRIFTSTREAM_BROKERS": "k"}, "no port"},
		{map[string]string{"DRIFTSTREAM_BROKERS": "k:1"}, "set DRIFTSTREAM_DIM"},
		{map[string]string{"DRIFTSTREAM_HASH_BITS": "4", "DRIFTSTREAM_DIM": "17"}, "more than the 2^4 hash buckets"},
		{map[string]string{"DRIFTSTREAM_LEARNER_PARAMS": "{c:1"}, "not valid JSON"},
		{map[string]string{"DRIFTSTREAM_CHECKPOINT_STORE": "file"}, "needs DRIFTSTREAM_CHECKPOINT_DIR"},
		{map[string]string{"DRIFTSTREAM_CHECKPOINT_STORE": "s3"}, "use kafka or file"},
		{map[string]string{"DRIFTSTREAM_LOG_LEVEL": "loud"}, "DRIFTSTREAM_LOG_LEVEL"},
		{map[string]string{"DRIFTSTREAM_SASL_MECHANISM": "plain", "DRIFTSTREAM_SASL_USERNAME": "u"}, "exactly one of DRIFTSTREAM_SASL_PASSWORD"},
		{map[string]string{"DRIFTSTREAM_SASL_MECHANISM": "kerberos"}, "use none, plain"},
		{map[string]string{"DRIFTSTREAM_SASL_USERNAME": "u"}, "MECHANISM=none"},
		{map[string]string{"DRIFTSTREAM_TLS_CA_FILE": "/ca.pem"}, "DRIFTSTREAM_TLS=true"},
		{map[string]string{"DRIFTSTREAM_TLS": "true", "DRIFTSTREAM_TLS_CERT_FILE": pw}, "both DRIFTSTREAM_TLS_CERT_FILE"},
		{map[string]string{"DRIFTSTREAM_TLS": "true", "DRIFTSTREAM_TLS_CA_FILE": "/nope.pem"}, "cannot read /nope.pem"},
		{map[string]string{"DRIFTSTREAM_PARK_STATE": "true"}, "DRIFTSTREAM_PARK_STATE needs DRIFTSTREAM_STATE_DIR"},
		{map[string]string{"DRIFTSTREAM_CHECKPOINT_MAX_EVERY": "9999"}, "DRIFTSTREAM_CHECKPOINT_MAX_EVERY=9999: must be 0 (ten times DRIFTSTREAM_CHECKPOINT_EVERY) or at least DRIFTSTREAM_CHECKPOINT_EVERY=10000"},
		{map[string]string{"DRIFTSTREAM_CHECKPOINT_MAX_EVERY": "-1"}, "DRIFTSTREAM_CHECKPOINT_MAX_EVERY=-1: must be 0"},
		{map[string]string{"DRIFTSTREAM_PARK_STATE": "true", "DRIFTSTREAM_STATE_DIR": "/s", "DRIFTSTREAM_CHECKPOINT_STORE": "file", "DRIFTSTREAM_CHECKPOINT_DIR": "/c"}, "needs the kafka checkpoint store"},
	}
	both := map[string]string{"DRIFTSTREAM_HASH_BITS": "4", "DRIFTSTREAM_DIM": "3"}
	for k, v := range good {
		if _, ok := both[k]; !ok {
			both[k] = v
		}
	}
	t.Run("dense and hashed together", func(t *testing.T) {
		if c, err := load(t, both); err != nil || c.Validate() != nil {
			t.Fatalf("refused: %v %v", err, c.Validate())
		}
	})
	for _, tc := range tests {
		env := map[string]string{}
		for k, v := range good {
			env[k] = v
		}
		for k, v := range tc.env {
			env[k] = v
		}
		if _, ok := tc.env["DRIFTSTREAM_DIM"]; (ok && tc.env["DRIFTSTREAM_HASH_BITS"] == "") || tc.frag == "no brokers" {
			delete(env, "DRIFTSTREAM_BROKERS")
		}
		if tc.frag == "set DRIFTSTREAM_DIM" {
			delete(env, "DRIFTSTREAM_DIM")
		}
		t.Run(tc.frag, func(t *testing.T) {
			c, err := load(t, env)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.frag) {
				t.Fatalf("err = %v, want %q", err, tc.frag)
			}
		})
	}
	c, _ := load(t, map[string]string{"DRIFTSTREAM_BROKERS": "k:1", "DRIFTSTREAM_DIM": "3", "DRIFTSTREAM_SASL_MECHANISM": "scram-sha-512",
		"DRIFTSTREAM_SASL_USERNAME": "u", "DRIFTSTREAM_SASL_PASSWORD_FILE": pw})
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if p, err := c.Password(); err != nil || p != "s3cret" {
		t.Fatalf("password %q %v", p, err)
	}
	c.SASLPassword, c.AdminToken = "hunter2", "adm1n-t0ken"
	if strings.Contains(c.Redacted(), "hunter2") || strings.Contains(c.Redacted(), "adm1n-t0ken") {
		t.Fatal("Redacted leaks the password or the admin token")
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("starting", "config", c)
	var line struct{ Config map[string]any }
	if err := json.Unmarshal(logged.Bytes(), &line); err != nil || strings.Contains(logged.String(), "hunter2") ||
		strings.Contains(logged.String(), "adm1n-t0ken") || line.Config["sasl-username"] != "u" || line.Config["checkpoint-period"] != "5s" {
		t.Fatalf("the configuration is not logged as redacted attributes (%v): %s", err, logged.String())
	}
}

// docs/CONFIGURATION.md's configuration table is the one the struct generates.
func TestReadmeTableIsInSync(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "docs", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), Markdown()) {
		t.Fatalf("docs/CONFIGURATION.md's configuration table is out of date; replace it with:\n%s", Markdown())
	}
}

func TestFlagName(t *testing.T) {
	for in, want := range map[string]string{"CheckpointEvery": "checkpoint-every", "TLSCAFile": "tlsca-file", "SASLMechanism": "sasl-mechanism", "Dim": "dim", "PendingTTL": "pending-ttl"} {
		if got := FlagName(in); got != want {
			t.Errorf("FlagName(%s) = %s, want %s", in, got, want)
		}
	}
}

// The configuration's defaults are the pipeline's and the service's: a
// service run from the environment, a service built in Go and a backtest
// given no settings behave alike. Every setting with a default in those
// packages' tables is compared.
func TestDefaultsAreThePipelines(t *testing.T) {
	c, err := Load(flag.NewFlagSet("t", flag.ContinueOnError), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := pipeline.Config{}.WithDefaults()
	cases := []struct {
		name      string
		env, code any
	}{
		{"MaxPending", c.MaxPending, p.MaxPending},
		{"PendingTTL", c.PendingTTL, p.PendingTTL},
		{"MaxPendingBytes", c.MaxPendingBytes, p.MaxPendingBytes},
		{"MaxKeyBytes", c.MaxKeyBytes, p.MaxKeyBytes},
		{"MaxKeyMemory", c.MaxKeyMemory, p.MaxKeyMemory},
		{"MaxAbsValue", c.MaxAbsValue, p.MaxAbsValue},
		{"MaxKeyLength", c.MaxKeyLength, p.MaxKeyLength},
		{"AlertCooldown", c.AlertCooldown, p.AlertCooldown},
		{"AlertMinRise", c.AlertMinRise, p.AlertMinRise},
		{"OnDrift", c.OnDrift, p.OnDrift},
		// The library's zero value keeps no population model (a caller of
		// pipeline opts in); the service's default is the additive one,
		// chosen by measurement (docs/LEARNING.md).
		{"Population", c.Population, keyed.PopulationAdditive},
		{"LearnFrom", c.LearnFrom, p.LearnFrom},
		{"RetryTimeout", c.RetryTimeout, pipeline.DefaultBackoff.Timeout},
		{"CheckpointEvery", c.CheckpointEvery, service.DefaultCheckpointEvery},
		{"CheckpointPeriod", c.CheckpointPeriod, service.DefaultCheckpointPeriod},
		{"FailExitAfter", c.FailExitAfter, service.DefaultFailExitAfter},
		{"ShutdownTimeout", c.ShutdownTimeout, service.DefaultFinalTimeout},
		{"SessionTimeout", c.SessionTimeout, service.DefaultSessionTimeout},
		{"TopicCheckInterval", c.TopicCheckInterval, service.DefaultTopicCheckInterval},
		{"MergeWait", c.MergeWait, service.DefaultMergeWait},
		{"OnOutputError", c.OnOutputError, service.OnOutputErrorDeadLetter},
	}
	for _, k := range cases {
		if fmt.Sprint(k.env) != fmt.Sprint(k.code) {
			t.Errorf("%s: the environment's default is %v, the code's %v", k.name, k.env, k.code)
		}
	}
}
