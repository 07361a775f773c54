// Command keyed-curve replays a keyed JSONL stream (scripts/keyed-data.py's or
// scripts/synth-jsonl's format: "key", dense "x", "label" ±1) through one
// learner per key, prequentially, and prints the accuracy overall, by the
// key's number of events (1–10, 11–100, 101–1,000, over 1,000) and by each
// event's place in its key's history (the key's 1st–10th event, 11th–100th,
// 101st–1,000th, later): where along a key's life two learners differ.
//
// It is written again from the doc comments, outside the product, so that
// variants can be tried without building them into it: River's
// LogisticRegression step (SGD at -lr on the weights and the intercept), and
// driftstream's logreg with -bias (docs/LEARNING.md, "Weighing by errors, a
// start for the first steps", whose per-key table it printed):
//
//	go run ./scripts/keyed-curve -data apart10.jsonl -model river
//	go run ./scripts/keyed-curve -data apart10.jsonl -weigh logloss -prior 0
//	go run ./scripts/keyed-curve -data apart10.jsonl -weigh logloss -prior 0 -predict slow
//	go run ./scripts/keyed-curve -data apart10.jsonl -weigh errors -prior 3
//
// With -model logreg it also prints the fast copy's mean weight on events
// after their key's 1,000th.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"slices"

	"github.com/driftstream/driftstream/backtest"
)

type event struct {
	Key   string    `json:"key"`
	X     []float64 `json:"x"`
	Label int       `json:"label"`
}

// model is one key's learner.
type model interface {
	margin(x []float64) float64
	learn(x []float64, y int)
}

func main() {
	data := flag.String("data", "", "keyed JSONL file")
	kind := flag.String("model", "logreg", "river or logreg")
	lr := flag.Float64("lr", 0.01, "river: the SGD rate")
	eta := flag.Float64("eta", 0.25, "logreg: η")
	decay := flag.Float64("decay", 0.99, "logreg: decay")
	slow := flag.Float64("slow", 0.08, "logreg: slow (0: one copy)")
	sel := flag.Float64("select", 0.999, "logreg: select")
	weigh := flag.String("weigh", "errors", "logreg: errors, logloss, brier or hinge")
	prior := flag.Float64("prior", 3, "logreg: prior")
	predict := flag.String("predict", "mix", "logreg: predict by the mix, or the fast or the slow copy alone")
	flag.Parse()
	evs, err := load(*data)
	if err != nil {
		log.Fatal(err)
	}
	size := map[string]int{}
	for _, e := range evs {
		size[e.Key]++
	}
	models, seen := map[string]model{}, map[string]int{}
	var bySize, byPlace [4][2]int
	right, fastW, old := 0, 0.0, 0
	for _, e := range evs {
		m := models[e.Key]
		if m == nil {
			switch *kind {
			case "river":
				m = &sgd{w: make([]float64, len(e.X)), lr: *lr}
			case "logreg":
				d := len(e.X) + 1
				m = &logreg{eta: *eta, decay: *decay, slow: *slow, sel: *sel, weigh: *weigh, prior: *prior, predict: *predict,
					w: make([]float64, d), ws: make([]float64, d), g2: make([]float64, d), fastW: 0.5}
			default:
				log.Fatalf("model %q: river or logreg", *kind)
			}
			models[e.Key] = m
		}
		x := e.X
		if l, ok := m.(*logreg); ok {
			x = append(append([]float64(nil), x...), 1) // -bias
			if seen[e.Key] >= 1000 {
				fastW += l.fastW
				old++
			}
		}
		ok := 0
		if sign(m.margin(x)) == e.Label {
			ok = 1
		}
		seen[e.Key]++
		right += ok
		s, p := bucket(size[e.Key]), bucket(seen[e.Key])
		bySize[s][0] += ok
		bySize[s][1]++
		byPlace[p][0] += ok
		byPlace[p][1]++
		m.learn(x, e.Label)
	}
	fmt.Printf("accuracy %.4f\nby key size (1-10, 11-100, 101-1000, >1000):%s\nby place in the key (1st-10th, 11th-100th, 101st-1000th, later):%s\n",
		float64(right)/float64(len(evs)), rates(bySize), rates(byPlace))
	if old > 0 {
		fmt.Printf("the fast copy's mean weight after a key's 1,000th event: %.3f\n", fastW/float64(old))
	}
}

func load(path string) ([]event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var evs []event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, len(evs)+1, err)
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 && sc.Err() == nil {
		return nil, fmt.Errorf("%s: no events", path)
	}
	return evs, sc.Err()
}

func rates(b [4][2]int) string {
	s := ""
	for _, c := range b {
		if c[1] == 0 {
			s += " -"
			continue
		}
		s += fmt.Sprintf(" %.4f", float64(c[0])/float64(c[1]))
	}
	return s
}

// bucket is the index of n's bucket: the backtest report's key sizes
// (backtest.KeySizes), for a key's events or an event's place in its key.
func bucket(n int) int {
	i, _ := slices.BinarySearch(backtest.KeySizes, int64(n))
	return i
}

// sign is the label a margin predicts (+1 at 0, as driftstream's learners).
func sign(m float64) int {
	if m < 0 {
		return -1
	}
	return 1
}

func dot(w, x []float64) float64 {
	s := 0.0
	for i, v := range x {
		s += w[i] * v
	}
	return s
}

func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}

// sgd is River's LogisticRegression() step: weights and intercept move by
// lr·(p − y) (y in {0, 1}).
type sgd struct {
	w     []float64
	b, lr float64
}

func (m *sgd) margin(x []float64) float64 { return dot(m.w, x) + m.b }

func (m *sgd) learn(x []float64, y int) {
	g := sigmoid(m.margin(x)) - float64(max(y, 0))
	for i, v := range x {
		m.w[i] -= m.lr * g * v
	}
	m.b -= m.lr * g
}

// logreg is driftstream's logreg of learners/logreg.go's doc comment, alone
// (not in a sum): a fast copy w and a slow one ws over the fast copy's
// accumulators g2, mixed by exponential weights on a running difference of
// their losses, the accumulators started at the first label by prior.
type logreg struct {
	eta, decay, slow, sel, prior float64
	weigh, predict               string
	w, ws, g2                    []float64
	diff, fastW                  float64
	labels                       int
}

func (m *logreg) margin(x []float64) float64 {
	switch m.predict {
	case "fast":
		return dot(m.w, x)
	case "slow":
		return dot(m.ws, x)
	}
	return m.fastW*dot(m.w, x) + (1-m.fastW)*dot(m.ws, x)
}

func (m *logreg) loss(y int, mg float64) float64 {
	z := float64(y) * mg
	switch m.weigh {
	case "errors":
		if z == 0 {
			return 0.5
		}
		return float64(btoi(z < 0))
	case "brier":
		d := sigmoid(mg) - float64(max(y, 0))
		return d * d
	case "hinge":
		return math.Max(0, 1-z)
	case "logloss":
		if z >= 0 {
			return math.Log1p(math.Exp(-z))
		}
		return -z + math.Log1p(math.Exp(z))
	}
	log.Fatalf("weigh %q: errors, logloss, brier or hinge", m.weigh)
	return 0
}

func (m *logreg) learn(x []float64, y int) {
	mw, ms := dot(m.w, x), dot(m.ws, x)
	g, gs := -float64(y)*sigmoid(-float64(y)*mw), -float64(y)*sigmoid(-float64(y)*ms)
	m.diff = m.sel*m.diff + m.loss(y, mw) - m.loss(y, ms)
	m.fastW = sigmoid(-m.diff)
	if m.labels++; m.labels == 1 && m.prior > 0 {
		mean := 0.0
		for _, v := range x {
			mean += g * v * g * v
		}
		for i := range m.g2 {
			m.g2[i] = m.prior * mean / float64(len(x))
		}
	}
	for i, v := range x {
		gi := g * v
		if gi == 0 {
			continue
		}
		m.g2[i] = m.decay*m.g2[i] + gi*gi
		r := math.Sqrt(m.g2[i])
		m.w[i] -= m.eta * gi / r
		m.ws[i] -= m.slow * m.eta * gs * v / r
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
