package pipeline

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/topics"
)

// Validate changes nothing; WithDefaults fills every unset field and
// keeps every set one; a configuration with its defaults validates as the
// same configuration without them.
func TestValidateIsPure(t *testing.T) {
	cfg := testConfig(t, "lasec-ss", `{"a":0.3}`)
	cfg.MaxPending, cfg.PendingTTL, cfg.MaxKeyLength = 0, 0, 0
	before := cfg
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, before) {
		t.Fatalf("Validate changed the configuration:\n%+v\n%+v", before, cfg)
	}
	d := cfg.WithDefaults()
	for name, unset := range map[string]bool{"MaxPending": d.MaxPending == 0, "PendingTTL": d.PendingTTL == 0, "MaxKeyLength": d.MaxKeyLength == 0,
		"MaxPendingBytes": d.MaxPendingBytes == 0, "MaxKeyBytes": d.MaxKeyBytes == 0, "MaxKeyMemory": d.MaxKeyMemory == 0, "MaxAbsValue": d.MaxAbsValue == 0,
		"OnDrift": d.OnDrift == "", "AlertCooldown": d.AlertCooldown == 0, "Population": d.Population == "", "TopicNames": d.TopicNames[0] == ""} {
		if unset {
			t.Errorf("WithDefaults left %s unset", name)
		}
	}
	if err := d.Validate(); err != nil || !reflect.DeepEqual(d.WithDefaults(), d) {
		t.Fatalf("with its defaults: %v; applying them twice changes it: %v", err, !reflect.DeepEqual(d.WithDefaults(), d))
	}
	set := cfg
	set.MaxPending, set.PendingTTL = 7, 9
	if d := set.WithDefaults(); d.MaxPending != 7 || d.PendingTTL != 9 {
		t.Fatalf("WithDefaults replaced set fields: %d, %d", d.MaxPending, d.PendingTTL)
	}
}

// logreg's slow copy is in the key-record bound: at 2^15 hashed
// dimensions its two step sizes (3d + 1 words) do not fit the default
// limits, and the refusal names the one step size, which does (2d words).
func TestLogRegSlowCopyIsInTheKeyBound(t *testing.T) {
	bound := func(params string) (int64, error) {
		vec, err := topics.NewVectorizer(0, 15)
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Settings: keyed.Settings{Learner: "logreg", Params: json.RawMessage(params), Seed: 1, Vector: vec, QueryScale: 1}}.WithDefaults()
		return cfg.KeyRecordBytes()
	}
	_, err := bound(`{}`)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), `logreg of one step size ("slow": 0`) {
		t.Fatalf("two step sizes at 2^15 dimensions: %v", err)
	}
	one, err := bound(`{"slow":0}`)
	if err != nil {
		t.Fatalf("one step size at 2^15 dimensions: %v", err)
	}
	if one > 900000 {
		t.Fatalf("one step size: bound %d", one)
	}
}
