package service

import (
	"context"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/keyed"
)

// A shared part across partitions with a labels topic is refused before
// anything starts: the other partitions' labels topic is not read, so
// their delayed labels would never reach it.
func TestSharedAcrossPartitionsRefusesALabelsTopic(t *testing.T) {
	cfg := testConfig(t, "127.0.0.1:1", "g")
	cfg.Pipeline.Learner, cfg.Pipeline.Params = "logreg", nil
	cfg.Pipeline.Population, cfg.Pipeline.SharedAcrossPartitions = keyed.PopulationAdditive, true
	cfg.Topics.Labels = "labels"
	if _, err := New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "not their labels topic") {
		t.Fatalf("a shared part across partitions with a labels topic: %v", err)
	}
}
