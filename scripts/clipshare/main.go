// Command clipshare measures how often the online z-scores of a stream hit
// the ±5 clip of learners.Standardizer, as the D-ODM reproduction feeds them
// (every input scored by the statistics of the inputs before it), per
// coordinate and in all.
//
//	go run ./scripts/clipshare ../shared/data/souza/1CSurr.txt
//	go run ./scripts/clipshare -label-file ../shared/data/sea/SEA_training_class.csv ../shared/data/sea/SEA_training_data.csv.gz
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/streams"
)

func main() {
	labelFile := flag.String("label-file", "", "labels in a separate file (SEA)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: clipshare [-label-file F] FILE.csv")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *labelFile); err != nil {
		fmt.Fprintln(os.Stderr, "clipshare:", err)
		os.Exit(1)
	}
}

func run(path, labelFile string) error {
	opts := streams.CSVOptions{Label: "last", Labels: streams.LabelMap{Positive: "1", Negative: "2"}}
	if labelFile != "" {
		opts = streams.CSVOptions{LabelFile: labelFile, Labels: streams.LabelMap{Positive: "1", Negative: "0"}}
	}
	src, err := streams.OpenCSV(path, opts)
	if err != nil {
		return err
	}
	std, err := learners.NewStandardizer(src.Dim())
	if err != nil {
		return err
	}
	clipped := make([]int64, src.Dim())
	var rows int64
	for {
		ex, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		z, err := std.Next(ex.X)
		if err != nil {
			return err
		}
		rows++
		z.Entries(func(i int, v float64) {
			if math.Abs(v) >= learners.StandardizeClip {
				clipped[i]++
			}
		})
	}
	var all int64
	for i, n := range clipped {
		all += n
		fmt.Printf("coordinate %d: %d of %d at the clip (%.4f%%)\n", i, n, rows, 100*float64(n)/float64(rows))
	}
	fmt.Printf("all: %d of %d coordinates at the clip (%.4f%%)\n", all, rows*int64(len(clipped)), 100*float64(all)/float64(rows*int64(len(clipped))))
	return nil
}
