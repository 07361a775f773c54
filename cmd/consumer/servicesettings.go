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
// and cooldown. It says on stderr what it runs.
func serviceSettings(set map[string]bool, population, learnFrom *string, standardize, bias *bool, queryScale *float64, cooldown *int64, stderr io.Writer) (serviceRun, error) {
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
		*population = c.Population
	}
	if !set["learn-from"] {
		*learnFrom = c.LearnFrom
	}
	if !set["standardize"] {
		*standardize = c.Standardize
	}
	if !set["bias"] {
		*bias = c.Bias
	}
	if !set["query-scale"] {
		*queryScale = c.QueryScale
	}
	if !set["alert-cooldown"] {
		*cooldown = c.AlertCooldown
	}
	params := "{}"
	if spec.Params != nil {
		params = string(spec.Params)
	}
	fmt.Fprintf(stderr, "no -learners: the service's configuration: learner %s %s, population %s, learn from %s, bias %v, standardize %v, query scale %g, %d detectors, cooldown %d\n",
		spec.Name, params, *population, *learnFrom, *bias, *standardize, *queryScale, len(run.detectors), *cooldown)
	return run, nil
}
