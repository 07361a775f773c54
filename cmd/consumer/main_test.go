package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/driftstream/driftstream/learners"
)

func TestRunDispatch(t *testing.T) {
	tests := []struct {
		args       []string
		code       int
		wantStdout string
		wantStderr string
	}{
		{nil, exitUsage, "", "no brokers"}, // run is the default subcommand
		{[]string{"-h"}, exitOK, "", "subcommands:"},
		{[]string{"help"}, exitOK, "", "learners"},
		{[]string{"frobnicate"}, exitUsage, "", `unknown subcommand "frobnicate"`},
		{[]string{"learners", "-nope"}, exitUsage, "", "flag provided but not defined"},
		{[]string{"learners", "extra"}, exitUsage, "", "unexpected arguments"},
		{[]string{"learners"}, exitOK, "tracking-winnow", ""},
		{[]string{"learners"}, exitOK, "paper: Moroshko, Crammer, Selective sampling with drift", ""},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tc.args, &out, &errb); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, errb.String())
			}
			if !strings.Contains(out.String(), tc.wantStdout) || !strings.Contains(errb.String(), tc.wantStderr) {
				t.Fatalf("stdout %q\nstderr %q", out.String(), errb.String())
			}
		})
	}
}

func TestLearnersTableListsEveryLearnerAndParameter(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"learners"}, &out, &bytes.Buffer{}); code != exitOK {
		t.Fatal(code)
	}
	for _, in := range learners.Catalog() {
		if !strings.Contains(out.String(), in.Name) {
			t.Errorf("table lacks %s", in.Name)
		}
		for _, p := range in.Params {
			if !strings.Contains(out.String(), p.Doc) {
				t.Errorf("table lacks %s.%s", in.Name, p.Name)
			}
		}
	}
}

func TestLearnersJSONContract(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"learners", "-json"}, &out, &bytes.Buffer{}); code != exitOK {
		t.Fatal(code)
	}
	var got []struct {
		Name   *string `json:"name"`
		Source *string `json:"source"`
		Params []struct {
			Name    *string          `json:"name"`
			Default *json.RawMessage `json:"default"`
			Doc     *string          `json:"doc"`
		} `json:"params"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("not a JSON array: %v", err)
	}
	if len(got) != len(learners.Names()) || len(got) != 19 { // the papers' 18 and logreg
		t.Fatalf("%d learners, want 19", len(got))
	}
	for _, l := range got {
		if l.Name == nil || l.Source == nil || *l.Source == "" || l.Params == nil {
			t.Fatalf("entry lacks name, source or params: %+v", l)
		}
		for _, p := range l.Params {
			if p.Name == nil || p.Default == nil || p.Doc == nil {
				t.Fatalf("%s: parameter lacks name, default or doc", *l.Name)
			}
		}
	}
}
