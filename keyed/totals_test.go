package keyed

import (
	"reflect"
	"testing"
)

// distinct is a Totals whose every counter (array entries too) is base
// plus its position, so that a counter left out of Add or Since shows.
func distinct(base int64) Totals {
	var t Totals
	v := reflect.ValueOf(&t).Elem()
	n := base
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.Array {
			for j := range f.Len() {
				f.Index(j).SetInt(n)
				n++
			}
			continue
		}
		f.SetInt(n)
		n++
	}
	return t
}

// Add sums every counter, KeysInWarning (a level across partitions) too;
// Since subtracts every counter but KeysInWarning, which stays the later
// reading's.
func TestTotalsAddAndSinceCoverEveryCounter(t *testing.T) {
	a, b := distinct(1000), distinct(1)
	sum := a
	sum.Add(b)
	diff := a.Since(b)
	av, bv, sv, dv := reflect.ValueOf(a), reflect.ValueOf(b), reflect.ValueOf(sum), reflect.ValueOf(diff)
	for i := range av.NumField() {
		name := av.Type().Field(i).Name
		at, bt, st, dt := av.Field(i), bv.Field(i), sv.Field(i), dv.Field(i)
		n := 1
		if at.Kind() == reflect.Array {
			n = at.Len()
		}
		for j := range n {
			x, y, s, d := at, bt, st, dt
			if at.Kind() == reflect.Array {
				x, y, s, d = at.Index(j), bt.Index(j), st.Index(j), dt.Index(j)
			}
			if s.Int() != x.Int()+y.Int() {
				t.Errorf("Add: %s[%d] = %d, want %d", name, j, s.Int(), x.Int()+y.Int())
			}
			want := x.Int() - y.Int()
			if name == "KeysInWarning" {
				want = x.Int()
			}
			if d.Int() != want {
				t.Errorf("Since: %s[%d] = %d, want %d", name, j, d.Int(), want)
			}
		}
	}
}

// Every entry of the counter table has its own name and reads its own
// counter: a copied line that reads another entry's field fails.
func TestCountersNameAndReadDistinctCounters(t *testing.T) {
	tot := distinct(1)
	names, values := map[string]bool{}, map[int64]string{}
	for _, c := range Counters() {
		if c.Name == "" || c.Help == "" || c.Value == nil {
			t.Errorf("counter %+v: a name, a help and a reader are required", c)
			continue
		}
		if names[c.Name] {
			t.Errorf("counter %q listed twice", c.Name)
		}
		names[c.Name] = true
		v := c.Value(&tot)
		if other, ok := values[v]; ok {
			t.Errorf("counters %q and %q read the same field", c.Name, other)
		}
		values[v] = c.Name
	}
}
