package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/config"
	"github.com/driftstream/driftstream/keyed"
)

// serviceRun is the service's learning configuration, for a keyed or topic
// backtest without -learners: "what the service would have done".
type serviceRun struct {
	specs     []backtest.Spec
	detectors []keyed.DetectorSpec
}

// serviceSettings reads the service's configuration (its DRIFTSTREAM_*
// environment and defaults) and sets every learning flag the command line
// did not set (set) from it: learner and parameters, population model,
// which labels teach, standardization, intercept, margin rule, detectors
// and the alerts' cooldown and minimum rise. It says on stderr what it runs.
func serviceSettings(set map[string]bool, f *backtestFlags, stderr io.Writer) (serviceRun, error) {
	if set["params"] {
		return serviceRun{}, usageError{fmt.Errorf("-params applies to -learners; without -learners the service's DRIFTSTREAM_LEARNER_PARAMS apply")}
	}
	c, err := config.Load(flag.NewFlagSet("service", flag.ContinueOnError), nil)
	if err != nil {
		return serviceRun{}, usageError{err}
	}
	spec := backtest.Spec{Name: c.Learner}
	if c.LearnerParams != "" {
		spec.Params = json.RawMessage(c.LearnerParams)
	}
	run := serviceRun{specs: []backtest.Spec{spec}}
	if err := json.Unmarshal([]byte(c.Detectors), &run.detectors); err != nil {
		return serviceRun{}, usageError{fmt.Errorf("DRIFTSTREAM_DETECTORS must be a JSON list: %v", err)}
	}
	if !set["population"] {
		f.population = c.Population
	}
	if !set["learn-from"] {
		f.learnFrom = c.LearnFrom
	}
	if !set["shared-across-partitions"] {
		f.sharedAcross = c.SharedAcrossPartitions
	}
	if !set["standardize"] {
		f.standardize = c.Standardize
	}
	if !set["bias"] {
		f.bias = c.Bias
	}
	if !set["query-scale"] {
		f.queryScale = c.QueryScale
	}
	if !set["alert-cooldown"] {
		f.cooldown = c.AlertCooldown
	}
	if !set["alert-min-rise"] {
		f.minRise = c.AlertMinRise
	}
	params := "{}"
	if spec.Params != nil {
		params = string(spec.Params)
	}
	fmt.Fprintf(stderr, "no -learners: the service's configuration: learner %s %s, population %s, learn from %s, shared across partitions %v, bias %v, standardize %v, query scale %g, %d detectors, cooldown %d, minimum rise %g\n",
		spec.Name, params, f.population, f.learnFrom, f.sharedAcross, f.bias, f.standardize, f.queryScale, len(run.detectors), f.cooldown, f.minRise)
	return run, nil
}
