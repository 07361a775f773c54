package experiments

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/driftstream/driftstream/learners"
	"github.com/driftstream/driftstream/streams"
)

// spamFeatures is how many of the spam set's 39,916 word features seed 003
// keeps (500 selected attributes, without saying how they were chosen).
const spamFeatures = 500

// openSpam reads ../shared/data/spam (one message per line: the label 0/1,
// then the 0-based indices of its words) as a stream of 500 binary
// features: the 500 words in the most messages of the whole file (ties by
// index). The choice never looks at a label; it does look at the inputs of
// every message, later ones included, as a selection made once before the
// stream would.
func openSpam(dir string) (streams.Source, error) {
	path := filepath.Join(dir, "spam/spam_sparse.txt.gz")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	type message struct {
		label int
		words []int
	}
	var msgs []message
	freq := map[int]int{}
	sc := bufio.NewScanner(gz)
	sc.Buffer(nil, 1<<22)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			return nil, fmt.Errorf("%s:%d: an empty line", path, line)
		}
		m := message{label: -1}
		switch fields[0] {
		case "1":
			m.label = 1
		case "0":
		default:
			return nil, fmt.Errorf("%s:%d: label %q, want 0 or 1", path, line, fields[0])
		}
		for _, s := range fields[1:] {
			w, err := strconv.Atoi(s)
			if err != nil || w < 0 {
				return nil, fmt.Errorf("%s:%d: word index %q", path, line, s)
			}
			m.words = append(m.words, w)
			freq[w]++
		}
		msgs = append(msgs, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	words := make([]int, 0, len(freq))
	for w := range freq {
		words = append(words, w)
	}
	slices.SortFunc(words, func(a, b int) int { return cmp.Or(freq[b]-freq[a], a-b) })
	column := map[int]int{}
	for i, w := range words[:min(spamFeatures, len(words))] {
		column[w] = i
	}
	exs := make([]streams.Example, len(msgs))
	for i, m := range msgs {
		x := make([]float64, spamFeatures)
		for _, w := range m.words {
			if c, ok := column[w]; ok {
				x[c] = 1
			}
		}
		v, err := learners.NewDense(x)
		if err != nil {
			return nil, err
		}
		exs[i] = streams.Example{ID: strconv.Itoa(i), X: v, Label: m.label}
	}
	return streams.FromExamples(spamFeatures, exs), nil
}
