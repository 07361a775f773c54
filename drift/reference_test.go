package drift

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// referenceSequences reads testdata/reference/sequences.txt.gz: 328 seeded
// sequences (stationary, abrupt rises and falls, ramps, learning curves,
// recurring switches, all-zero and all-one, real-valued and score-like
// shifts; sequences.py made them).
func referenceSequences(t *testing.T) (names []string, seqs map[string][]float64) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "reference", "sequences.txt.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(z)
	sc.Buffer(nil, 1<<24)
	seqs = map[string][]float64{}
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		xs := make([]float64, len(fields)-1)
		for i, s := range fields[1:] {
			if xs[i], err = strconv.ParseFloat(s, 64); err != nil {
				t.Fatal(err)
			}
		}
		names = append(names, fields[0])
		seqs[fields[0]] = xs
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names, seqs
}

// referenceAlarms reads testdata/reference/moa.txt: MOA's alarm indices per
// sequence and detector (run.sh made it, from Alarms.java).
func referenceAlarms(t *testing.T) map[string][]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "reference", "moa.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		idx := []int{}
		for _, s := range fields[2:] {
			i, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			idx = append(idx, i)
		}
		out[fields[0]+" "+fields[1]] = idx
	}
	return out
}

// alarms runs a fresh detector over xs and returns the indices of its
// Drift verdicts.
func alarms(t *testing.T, name string, xs []float64) []int {
	t.Helper()
	d, err := New(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	idx := []int{}
	for i, x := range xs {
		if d.Add(x) == Drift {
			idx = append(idx, i)
		}
	}
	return idx
}

// Every detector raises exactly MOA's alarms, at MOA's default options, on
// every reference sequence: the reference nobody here wrote (MOA 2024.07.0,
// whose detectors River ported), run by testdata/reference/run.sh.
func TestDetectorsMatchMOA(t *testing.T) {
	names, seqs := referenceSequences(t)
	want := referenceAlarms(t)
	if len(names) < 300 {
		t.Fatalf("%d reference sequences, want at least 300", len(names))
	}
	for _, det := range Names() {
		t.Run(det, func(t *testing.T) {
			differ, alarmsSeen := 0, 0
			for _, name := range names {
				w, ok := want[name+" "+det]
				if !ok {
					t.Fatalf("no MOA alarms for %s %s", name, det)
				}
				got := alarms(t, det, seqs[name])
				alarmsSeen += len(w)
				if !slices.Equal(got, w) {
					if differ++; differ <= 5 {
						t.Errorf("%s: alarms at %v, MOA at %v", name, head(got), head(w))
					}
				}
			}
			if differ > 0 {
				t.Errorf("%d of %d sequences differ from MOA", differ, len(names))
			}
			if alarmsSeen == 0 {
				t.Errorf("MOA raised no alarm on any sequence: nothing was compared")
			}
			t.Logf("%d sequences, %d MOA alarms", len(names), alarmsSeen)
		})
	}
}

func head(xs []int) string {
	if len(xs) > 8 {
		return fmt.Sprint(xs[:8]) + fmt.Sprintf("…(%d)", len(xs))
	}
	return fmt.Sprint(xs)
}

// An alarm means the watched mean rose: a perfect key (every value 0) never
// alarms, nor does a key after its rate fell to 0; ADWIN cuts its window
// when the mean falls (its two-sided test adapts) but raises no alarm then.
func TestImprovementNeverAlarms(t *testing.T) {
	names, seqs := referenceSequences(t)
	quietFrom := map[string]int{"stationary-p0.0": 0, "fall-0.2-0.0": 1500, "ramp-down-0.2-0.0": 2000}
	checked := 0
	for _, name := range names {
		from, ok := quietFrom[name[:strings.LastIndex(name, "/")]]
		if !ok {
			continue
		}
		checked++
		for _, det := range Names() {
			for _, i := range alarms(t, det, seqs[name]) {
				if i >= from {
					t.Errorf("%s: %s alarmed at %d, after the rate fell to 0 at %d", name, det, i, from)
				}
			}
		}
	}
	if checked != 24 {
		t.Fatalf("%d sequences checked, want 24", checked)
	}
	cuts, drifts := 0, 0
	for _, name := range names {
		if !strings.HasPrefix(name, "fall-") {
			continue
		}
		d, _ := New("adwin", nil)
		a := d.(*adwin)
		for _, x := range seqs[name] {
			before := a.Mean()
			if a.cut(x) {
				cuts++
				if a.Mean() > before {
					drifts++
				}
			}
		}
	}
	if cuts == 0 || drifts != 0 {
		t.Fatalf("ADWIN on the falls: %d cuts, %d of them after which the mean rose; want cuts, and no rise", cuts, drifts)
	}
}
