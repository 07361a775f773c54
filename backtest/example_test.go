package backtest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/driftstream/driftstream/backtest"
	"github.com/driftstream/driftstream/keyed"
	"github.com/driftstream/driftstream/pipeline"
	"github.com/driftstream/driftstream/streams"
	"github.com/driftstream/driftstream/topics"
)

// A keyed backtest of a file: a JSONL history, one learner per key as the
// service keeps them, every label sent 5 events after its event, replayed
// through one pipeline per partition (here 2); the report is what the
// service would have counted. `consumer backtest -keyed -data FILE -key
// key` runs the same.
func ExampleReplay() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "history.jsonl")
	f, _ := os.Create(path)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		key := i % 4
		x := []float64{r.NormFloat64(), r.NormFloat64()}
		label := 1 // each key's own concept: the sign of one coordinate
		if x[key%2]*float64(1-2*(key/2)) < 0 {
			label = -1
		}
		fmt.Fprintf(f, `{"key":"k%d","id":"%d","x":[%g,%g],"label":%d}`+"\n", key, i, x[0], x[1], label)
	}
	f.Close()

	src, err := streams.OpenJSONL(path, streams.JSONLOptions{Dim: 2, KeyField: "key"})
	if err != nil {
		fmt.Println(err)
		return
	}
	in, err := backtest.FromSource(src, backtest.MessageOptions{Keys: 1, LabelsDelay: 5}, 2, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	vec, _ := topics.NewVectorizer(2, 0)
	rep, err := backtest.Replay(context.Background(), backtest.ReplayConfig{Name: "example",
		Pipeline: pipeline.Config{Settings: keyed.Settings{Learner: "logreg", Vector: vec}}}, in)
	if err != nil {
		fmt.Println(err)
		return
	}
	t := rep.Totals
	fmt.Printf("%d keys, %d events, %d labeled (%d delayed), accuracy above 0.9: %v\n", rep.Keys, t.Events, t.Labeled, t.DelayedLabeled, rep.Accuracy > 0.9)
	// Output:
	// 4 keys, 2000 events, 2000 labeled (2000 delayed), accuracy above 0.9: true
}
