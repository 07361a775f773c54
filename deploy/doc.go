// Package deploy holds no code: its tests check the repository's deployment
// artefacts — the Dockerfile (the rules that matter, since no Docker engine
// builds it in CI) and the Helm chart (rendered by helm and decoded strictly
// into the Kubernetes API types, so that a misspelled field fails).
package deploy
