package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/driftstream/driftstream/learners"
)

// runLearners prints the learner catalog: a table for people, JSON for tools.
func runLearners(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("learners", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, `print a JSON array of {"name", "params": [{"name","default","doc"}], "source"}`)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "learners: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	cat := learners.Catalog()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(cat); err != nil {
			fmt.Fprintf(stderr, "learners: %v\n", err)
			return exitError
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LEARNER\tPARAMETER\tDEFAULT\tDESCRIPTION")
	for _, in := range cat {
		kind := ""
		if in.Sampling {
			kind = " [selective sampling]"
		}
		fmt.Fprintf(tw, "%s\t\t\t%s%s\n", in.Name, in.Summary, kind)
		for _, p := range in.Params {
			def, _ := json.Marshal(p.Default)
			if s, ok := p.Default.(string); ok {
				def = []byte(s) // derived defaults read better unquoted: n/2
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\n", p.Name, def, p.Doc)
		}
		fmt.Fprintf(tw, "\t\t\tpaper: %s\n", in.Source)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "learners: %v\n", err)
		return exitError
	}
	return exitOK
}
