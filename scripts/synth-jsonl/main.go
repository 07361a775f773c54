// Command synth-jsonl writes a built-in generator's stream as keyed JSONL
// (key, id, x, label), so that a reference outside the project (River,
// scripts/eval-keyed.py) runs on the very events a keyed backtest sees.
//
//	go run ./scripts/synth-jsonl 'population?T=100000&keys=3000' 7 > pop.jsonl
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/driftstream/driftstream/streams"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: synth-jsonl 'GENERATOR?k=v' SEED")
		os.Exit(2)
	}
	seed, err := strconv.ParseUint(os.Args[2], 10, 64)
	if err == nil {
		err = write(os.Args[1], seed, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "synth-jsonl:", err)
		os.Exit(1)
	}
}

func write(spec string, seed uint64, w io.Writer) error {
	src, err := streams.OpenSynth(spec, seed)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	ctx := context.Background()
	for {
		ex, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out.Flush()
		}
		if err != nil {
			return err
		}
		if ex.LabelRecord {
			return errors.New("the generator writes label records: run it with labels inline")
		}
		key := ex.Key
		if key == "" {
			key = "k"
		}
		if err := enc.Encode(struct {
			Key   string    `json:"key"`
			ID    string    `json:"id"`
			X     []float64 `json:"x"`
			Label int       `json:"label"`
		}{key, ex.ID, ex.X.Dense(), ex.Label}); err != nil {
			return err
		}
	}
}
