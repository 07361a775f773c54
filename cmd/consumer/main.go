// Command consumer is the driftstream service and its tools. Subcommands:
//
//	run [flags]        the Kafka service (the default: 'consumer -embedded' runs it on an
//	                   in-process broker with a demo producer)
//	learners [-json]   print the learner catalog (names, parameters, defaults, papers)
//	backtest ...       replay a file or generator through learners; summary, curves, plot
//
// Exit codes: 0 ok, 2 bad usage or configuration (the message says what and
// how to fix it), 1 runtime error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// command is one subcommand: its one-line help and its entry point.
type command struct {
	help string
	run  func(args []string, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"learners":   {"print the learner catalog as a table (-json: as JSON)", runLearners},
		"backtest":   {"replay a file or generator through learners and write a report", runBacktest},
		"population": {"compare per-key, global and population-seeded learners on a keyed stream, per key-frequency bucket, through the service's pipeline", runPopulation},
		"detection":  {"score the drift detectors on keyed streams with known drift points, through the service's pipeline", runDetection},
		"run":        {"the Kafka service (default; -embedded: in-process broker and demo producer)", runService},
		"version":    {"print the version and commit", func(_ []string, stdout, _ io.Writer) int { fmt.Fprintln(stdout, version, commit); return exitOK }},
	}
}

// run dispatches to a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "-help" && args[0] != "--help" {
		return runService(args, stdout, stderr) // run is the default subcommand
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		return exitOK
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "consumer: unknown subcommand %q\n", args[0])
		usage(stderr, cmds)
		return exitUsage
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintf(w, "usage: consumer <subcommand> [flags]\n\nsubcommands:\n")
	for _, n := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].help)
	}
	fmt.Fprintf(w, "\nRun 'consumer <subcommand> -h' for its flags.\n")
}

// version and commit are set at build time (-ldflags "-X main.version=...").
var (
	version = "dev"
	commit  = "unknown"
)

// parseFlags parses a command's flags: ok to go on, or the exit code to
// return (exitOK after -h, which printed the usage; exitUsage on a bad flag,
// which the flag set reported).
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return exitOK, true
}

// failer returns a command's error reporter: it prints "name: err" to
// stderr and returns code, the exit code.
func failer(name string, stderr io.Writer) func(err error, code int) int {
	return func(err error, code int) int {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return code
	}
}
