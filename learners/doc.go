// Package learners holds the drift-tracking online classifiers of driftstream:
// the Perceptron family (plain, Modified, Shifting, Randomized Budget), the 1-D
// threshold tracker, the multiplicative family (Winnow2, tracking Winnow, shifting
// Winnow, weighted majority), the second-order family (SOP, LASEC and their
// diagonal approximations), the selective samplers (Perceptron-SS, SOP-SS,
// LASEC-SS, BBQ, BBQ-I) and online/dynamic optimal-margin-distribution learners.
//
// Every learner implements [Learner]. A round is
//
//	p, err := l.Predict(x) // pure: no state changes
//	p = l.Decide(p)        // consumes the round's randomness and round counters
//	if p.Query {           // samplers ask for some labels; others for all
//		err = l.Learn(x, y, p)
//	}
//
// Learners are built by name from JSON parameters through [New], which validates
// them against the catalog returned by [Catalog]. State round-trips exactly,
// RNG included, through MarshalBinary/UnmarshalBinary, and [Restore] rebuilds a
// learner from a snapshot alone.
//
// The algorithms follow docs/spec/ALGORITHMS.md; section numbers in doc comments
// refer to it. A Learner is not safe for concurrent use: in driftstream each key's
// learner is owned by exactly one partition worker.
package learners
