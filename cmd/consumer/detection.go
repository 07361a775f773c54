package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/drift"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/streams"
)

// detectorSpecs reads -detectors: a JSON list, or "all".
func detectorSpecs(flag string) ([]keyed.DetectorSpec, error) {
	switch flag {
	case "":
		return nil, nil
	case "all": // every detector on every signal it can watch: DDM and EDDM count mistakes
		var all []keyed.DetectorSpec
		for _, name := range drift.Names() {
			for _, sig := range []string{keyed.SignalMistakes, keyed.SignalQueries, keyed.SignalScore} {
				if !drift.Binary(name) || sig == keyed.SignalMistakes {
					all = append(all, keyed.DetectorSpec{Detector: name, Signal: sig})
				}
			}
		}
		return all, nil
	}
	var specs []keyed.DetectorSpec
	if err := json.Unmarshal([]byte(flag), &specs); err != nil {
		return nil, usageError{fmt.Errorf(`-detectors: %v: give a JSON list such as [{"detector":"adwin","signal":"mistakes"}] or "all"`, err)}
	}
	return specs, nil
}

// driftPoints are the known drift points of data, which must be a
// generator that knows them.
func driftPoints(data string) ([]int, error) {
	if !streams.IsSynth(data) {
		return nil, usageError{errors.New("-detectors needs a generator with known drift points (synth:switching-gaussian, sea, shifting-disjunction)")}
	}
	src, err := streams.OpenSynth(data, 0)
	if err != nil {
		return nil, err
	}
	d, ok := src.(streams.Drifting)
	if !ok || len(d.DriftPoints()) == 0 {
		return nil, usageError{fmt.Errorf("%s has no abrupt drift points to score detectors against", data)}
	}
	return d.DriftPoints(), nil
}

// reportDetection scores each learner's detectors against the drift
// points, pooled over repeats, prints a table and writes detection.json.
func reportDetection(dir string, drifts []int, res backtest.Result, dets []keyed.DetectorSpec, stdout io.Writer) error {
	type row struct {
		Learner string               `json:"learner"`
		Scores  []backtest.Detection `json:"detectors"`
	}
	var rows []row
	fmt.Fprintf(stdout, "\ndrift detection against %d known drift points per repeat:\n", len(drifts))
	fmt.Fprintf(stdout, "%-14s %-24s %9s %9s %9s %14s\n", "learner", "detector/signal", "found", "median", "p90", "false per 10k")
	for i, ls := range res.Summary.Learners {
		r := row{Learner: ls.Name}
		for _, spec := range dets {
			key := spec.Detector + "/" + spec.Signal
			var pooled backtest.Detection
			for k, run := range res.Runs[i] {
				s := backtest.ScoreAlerts(key, run.Alerts[key], drifts, run.Events)
				if k == 0 {
					pooled = s
				} else {
					pooled.Add(s)
				}
			}
			r.Scores = append(r.Scores, pooled)
			fmt.Fprintf(stdout, "%-14s %-24s %4d/%-4d %9.0f %9.0f %14.2f\n", ls.Name, key, pooled.Found, pooled.Drifts, pooled.MedianDelay, pooled.P90Delay, pooled.FalsePer10k)
		}
		rows = append(rows, r)
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "detection.json"), append(b, '\n'), 0o644)
}
