package streams

import (
	"bytes"
	"compress/gzip"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, content string, gz bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	data := []byte(content)
	if gz {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(data)
		w.Close()
		data = b.Bytes()
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sharedData returns ../shared/data, or skips when the folder is absent
// (it is always present in CI, where .ci/run checks for it).
func sharedData(t *testing.T, rel string) string {
	t.Helper()
	dir := os.Getenv("DRIFTSTREAM_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	path := filepath.Join(dir, rel)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("shared data %s not present (set DRIFTSTREAM_DATA): %v", path, err)
	}
	return path
}

func TestCSVReader(t *testing.T) {
	content := "a,b,class,id\n1,2,UP,k1\n3.5,-4,DOWN,k2\n0,0,?,k1\n"
	for _, gz := range []bool{false, true} {
		path := writeFile(t, "x.csv", content, gz)
		src, err := OpenCSV(path, CSVOptions{Header: true, Label: "class", Key: "id", Labels: LabelMap{Positive: "UP"}})
		if err != nil {
			t.Fatal(err)
		}
		exs := drainAny(t, src)
		if src.Dim() != 2 || len(exs) != 3 {
			t.Fatalf("gz=%v: dim %d, %d rows", gz, src.Dim(), len(exs))
		}
		if exs[0].Label != 1 || exs[1].Label != -1 || exs[2].Label != 0 || exs[1].Key != "k2" {
			t.Fatalf("labels/keys %+v", exs)
		}
		if !slices.Equal(exs[1].X.Dense(), []float64{3.5, -4}) {
			t.Fatalf("x = %v", exs[1].X.Dense())
		}
	}
	// No header, label by index, separate label file.
	data := writeFile(t, "d.csv", "1,2\n3,4\n", false)
	labels := writeFile(t, "l.csv", "1\n0\n", false)
	src, err := OpenCSV(data, CSVOptions{LabelFile: labels, Labels: LabelMap{Positive: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if exs := drainAny(t, src); exs[0].Label != 1 || exs[1].Label != -1 {
		t.Fatalf("label file: %+v", exs)
	}
}

func TestCSVReaderErrors(t *testing.T) {
	tests := []struct {
		name, content string
		opts          CSVOptions
		frags         []string
	}{
		{"bad number", "1,2,1\n3,x,0\n", CSVOptions{Label: "last", Labels: LabelMap{Positive: "1"}}, []string{":2:3", `"x"`}},
		{"NaN", "1,NaN,1\n", CSVOptions{Label: "last", Labels: LabelMap{Positive: "1"}}, []string{":1:3", "finite"}},
		{"field count", "1,2,1\n3,0\n", CSVOptions{Label: "last", Labels: LabelMap{Positive: "1"}}, []string{":2", "2 fields, expected 3"}},
		{"no positive", "1,2,1\n", CSVOptions{Label: "last"}, []string{"positive"}},
		{"unknown column", "a,b\n1,2\n", CSVOptions{Header: true, Label: "class", Labels: LabelMap{Positive: "1"}}, []string{`no column "class"`, "columns: a, b"}},
		{"name without header", "1,2\n", CSVOptions{Label: "class", Labels: LabelMap{Positive: "1"}}, []string{"no header"}},
		{"strict negative", "1,2,UP\n1,2,SIDEWAYS\n", CSVOptions{Label: "3", Labels: LabelMap{Positive: "UP", Negative: "DOWN"}}, []string{":2:5", "SIDEWAYS"}},
		{"empty", "", CSVOptions{}, []string{"no data rows"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "bad.csv", tc.content, false)
			src, err := OpenCSV(path, tc.opts)
			if err == nil {
				for err == nil {
					_, err = src.Next(t.Context())
				}
			}
			if err == nil || errors.Is(err, errEOF) {
				t.Fatalf("no error")
			}
			for _, f := range tc.frags {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q lacks %q", err, f)
				}
			}
		})
	}
	// A label file with a different number of rows is an error either way.
	data := writeFile(t, "d.csv", "1\n2\n", false)
	for _, labels := range []string{"1\n", "1\n0\n1\n"} {
		src, err := OpenCSV(data, CSVOptions{LabelFile: writeFile(t, "l.csv", labels, false), Labels: LabelMap{Positive: "1"}})
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = src.Next(t.Context())
		}
		if !errors.Is(err, ErrFormat) {
			t.Fatalf("labels %q: err = %v", labels, err)
		}
	}
}

func TestARFFReader(t *testing.T) {
	content := `% comment
@relation 'weather, quoted'
@attribute temp numeric
@attribute 'sky kind' {sunny,rainy,cloudy}
@attribute word {0,1}
@attribute class {UP,DOWN}

@data
1.5,rainy,1,UP
-2,'cloudy',0,DOWN
% a comment row
0,sunny,0,?
`
	src, err := OpenARFF(writeFile(t, "w.arff", content, true), ARFFOptions{Label: "class", Labels: LabelMap{Positive: "UP"}})
	if err != nil {
		t.Fatal(err)
	}
	exs := drainAny(t, src)
	if src.Dim() != 1+3+1 || len(exs) != 3 {
		t.Fatalf("dim %d, rows %d", src.Dim(), len(exs))
	}
	if !slices.Equal(exs[0].X.Dense(), []float64{1.5, 0, 1, 0, 1}) || !slices.Equal(exs[1].X.Dense(), []float64{-2, 0, 0, 1, 0}) {
		t.Fatalf("encoding: %v %v", exs[0].X.Dense(), exs[1].X.Dense())
	}
	if exs[0].Label != 1 || exs[1].Label != -1 || exs[2].Label != 0 {
		t.Fatal("labels")
	}
	bad := []struct{ row, frag string }{
		{"1,foggy,0,UP", `"foggy" is not one of`},
		{"?,sunny,0,UP", "missing value for temp"},
		{"1,sunny,0", "3 values"},
		{"1,sunny,0,LEFT", `class "LEFT"`},
		{"{0 1, 3 UP}", "sparse ARFF"},
	}
	head := content[:strings.Index(content, "@data")+len("@data\n")]
	for _, b := range bad {
		src, err := OpenARFF(writeFile(t, "b.arff", head+b.row+"\n", false), ARFFOptions{Label: "last", Labels: LabelMap{Positive: "UP"}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = src.Next(t.Context())
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), b.frag) || !strings.Contains(err.Error(), "b.arff:9") {
			t.Errorf("row %q: err = %v", b.row, err)
		}
	}
	if _, err := OpenARFF(writeFile(t, "c.arff", content, false), ARFFOptions{Label: "class", Labels: LabelMap{Positive: "up"}}); err == nil || !strings.Contains(err.Error(), "not a value of class") {
		t.Errorf("positive outside the class values: %v", err)
	}
}

// NominalAsNumber keeps a nominal of numbers as one feature holding the
// value; a nominal with a word among its values is still one-hot encoded.
func TestARFFNominalAsNumber(t *testing.T) {
	content := `@relation r
@attribute day {1,2,7}
@attribute half {0.5,-1e1}
@attribute sky {1,rainy}
@attribute class {UP,DOWN}
@data
7,-1e1,rainy,UP
1,0.5,1,DOWN
`
	src, err := OpenARFF(writeFile(t, "n.arff", content, false), ARFFOptions{Label: "class", Labels: LabelMap{Positive: "UP"}, NominalAsNumber: true})
	if err != nil {
		t.Fatal(err)
	}
	exs := drainAny(t, src)
	if src.Dim() != 1+1+2 || len(exs) != 2 {
		t.Fatalf("dim %d, rows %d", src.Dim(), len(exs))
	}
	if !slices.Equal(exs[0].X.Dense(), []float64{7, -10, 0, 1}) || !slices.Equal(exs[1].X.Dense(), []float64{1, 0.5, 1, 0}) {
		t.Fatalf("encoding: %v %v", exs[0].X.Dense(), exs[1].X.Dense())
	}
}

// The shared data sets read with the documented rules and the sizes and class
// shares of ../shared/data/README.md.
func TestSharedDataSets(t *testing.T) {
	tests := []struct {
		name     string
		open     func(t *testing.T) (Source, error)
		rows     int
		dim      int
		posShare float64 // share of +1 labels; < 0: not checked
	}{
		{"elec2", func(t *testing.T) (Source, error) {
			return OpenARFF(sharedData(t, "elec2/elecNorm.arff.gz"), ARFFOptions{Label: "class", Labels: LabelMap{Positive: "UP"}})
		}, 45312, 7 + 7, 0.425},
		{"elec2, day as a number (Table 1's 8 inputs)", func(t *testing.T) (Source, error) {
			return OpenARFF(sharedData(t, "elec2/elecNorm.arff.gz"), ARFFOptions{Label: "class", Labels: LabelMap{Positive: "UP"}, NominalAsNumber: true})
		}, 45312, 8, 0.425},
		{"sea", func(t *testing.T) (Source, error) {
			return OpenCSV(sharedData(t, "sea/SEA_training_data.csv.gz"), CSVOptions{LabelFile: sharedData(t, "sea/SEA_training_class.csv"), Labels: LabelMap{Positive: "1", Negative: "0"}})
		}, 50000, 3, 0.381},
		{"usenet1", func(t *testing.T) (Source, error) {
			return OpenARFF(sharedData(t, "usenet/usenet1.arff"), ARFFOptions{Label: "last", Labels: LabelMap{Positive: "1", Negative: "0"}})
		}, 1500, 99, -1},
		{"1CDT", func(t *testing.T) (Source, error) {
			return OpenCSV(sharedData(t, "souza/1CDT.txt"), CSVOptions{Label: "last", Labels: LabelMap{Positive: "2", Negative: "1"}})
		}, 16000, 2, 0.5},
		{"UG_2C_2D", func(t *testing.T) (Source, error) {
			return OpenCSV(sharedData(t, "souza/UG_2C_2D.txt.gz"), CSVOptions{Label: "last", Labels: LabelMap{Positive: "2", Negative: "1"}})
		}, 100000, 2, 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, err := tc.open(t)
			if err != nil {
				t.Fatal(err)
			}
			exs := drainAny(t, src)
			if len(exs) != tc.rows || src.Dim() != tc.dim {
				t.Fatalf("%d rows × %d, want %d × %d", len(exs), src.Dim(), tc.rows, tc.dim)
			}
			pos := 0
			for _, ex := range exs {
				if ex.Label == 1 {
					pos++
				}
			}
			if share := float64(pos) / float64(len(exs)); tc.posShare >= 0 && math.Abs(share-tc.posShare) > 0.005 {
				t.Fatalf("positive share %.4f, want %.3f", share, tc.posShare)
			}
		})
	}
}
