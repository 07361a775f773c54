package keystore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func open(t *testing.T, opt Options) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "p0"), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func get(t *testing.T, s *Store, key string) (string, bool) {
	t.Helper()
	v, ok, err := s.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

func TestStoreKeepsLatestRecordPerKey(t *testing.T) {
	type op struct {
		del        bool
		key, value string
	}
	for _, tc := range []struct {
		name string
		ops  []op
		want map[string]string // absent: no record
	}{
		{"set", []op{{key: "a", value: "1"}}, map[string]string{"a": "1", "b": ""}},
		{"overwrite", []op{{key: "a", value: "1"}, {key: "a", value: "2"}}, map[string]string{"a": "2"}},
		{"delete", []op{{key: "a", value: "1"}, {key: "b", value: "2"}, {del: true, key: "a"}}, map[string]string{"a": "", "b": "2"}},
		{"set after delete", []op{{key: "a", value: "1"}, {del: true, key: "a"}, {key: "a", value: "3"}}, map[string]string{"a": "3"}},
		{"binary keys", []op{{key: "\xff\xff\xff\xff\xff", value: "x"}, {key: "\x00", value: "y"}}, map[string]string{"\xff\xff\xff\xff\xff": "x", "\x00": "y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, Options{})
			for _, o := range tc.ops {
				var err error
				if o.del {
					err = s.Delete(o.key)
				} else {
					err = s.Set(o.key, []byte(o.value))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			for k, want := range tc.want {
				got, ok := get(t, s, k)
				if ok != (want != "") || got != want {
					t.Errorf("Get(%q) = %q, %v; want %q", k, got, ok, want)
				}
			}
		})
	}
}

// TestStoreBeyondMemtables writes more than the memtables hold, in batches
// committed as they fill, so that reads come from flushed tables too.
func TestStoreBeyondMemtables(t *testing.T) {
	s := open(t, Options{MemTableBytes: 256 << 10, BatchBytes: 64 << 10, CacheBytes: 1 << 20})
	const n = 20_000
	value := func(i, gen int) []byte { return bytes.Repeat([]byte{byte(i), byte(gen)}, 50+i%50) }
	var buf []byte // one buffer for every Set, overwritten after it: Set copies
	for gen := 0; gen < 2; gen++ {
		for i := 0; i < n; i++ {
			if gen == 1 && i%3 == 0 {
				if err := s.Delete(fmt.Sprint(i)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			buf = append(buf[:0], value(i, gen)...)
			if err := s.Set(fmt.Sprint(i), buf); err != nil {
				t.Fatal(err)
			}
			for j := range buf {
				buf[j] = 0xff
			}
		}
	}
	wrong, missing, extra := 0, 0, 0
	for i := 0; i < n; i++ {
		v, ok, err := s.Get(fmt.Sprint(i))
		switch {
		case err != nil:
			t.Fatal(err)
		case i%3 == 0 && ok:
			extra++
		case i%3 != 0 && !ok:
			missing++
		case i%3 != 0 && !bytes.Equal(v, value(i, 1)):
			wrong++
		}
	}
	if wrong+missing+extra != 0 {
		t.Errorf("%d wrong, %d missing, %d deleted but present, of %d keys", wrong, missing, extra, n)
	}
}

func TestStoreReset(t *testing.T) {
	s := open(t, Options{})
	for i := 0; i < 100; i++ {
		if err := s.Set(fmt.Sprint(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("staged", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	left := 0
	for i := 0; i < 100; i++ {
		if _, ok := get(t, s, fmt.Sprint(i)); ok {
			left++
		}
	}
	if _, ok := get(t, s, "staged"); ok {
		left++
	}
	if left != 0 {
		t.Errorf("%d of 101 records left after Reset", left)
	}
	if err := s.Set("after", []byte("w")); err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, s, "after"); !ok || v != "w" {
		t.Errorf("Get after Reset = %q, %v", v, ok)
	}
}

func TestStoreDirectoryIsItsOwn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("Open of a directory holding a file succeeded")
	}
	os.Remove(filepath.Join(dir, "other"))
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open of an empty directory: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory after Close: %v, want removed", err)
	}
	for name, err := range map[string]error{"Set": s.Set("a", nil), "Delete": s.Delete("a"), "Flush": s.Flush(), "Close": s.Close()} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if _, _, err := s.Get("a"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
	if _, err := Open(dir, Options{CacheBytes: -1}); err == nil {
		t.Error("Open with a negative cache succeeded")
	}
}

// TestParkThenReopen parks a store holding committed, flushed-to-table and
// staged records (more than the memtables hold, so some are in tables
// already) and reopens it: every record comes back, deleted ones stay
// deleted, and the manifest is returned once.
func TestParkThenReopen(t *testing.T) {
	root := t.TempDir()
	opt := Options{MemTableBytes: 256 << 10, BatchBytes: 64 << 10, CacheBytes: 1 << 20}
	s, err := Open(filepath.Join(root, "store-1"), opt)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5_000
	value := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 100+i%100) }
	for i := 0; i < n; i++ {
		if err := s.Set(fmt.Sprint(i), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 7 {
		if err := s.Delete(fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Set("staged", []byte("last")); err != nil { // not committed before Park
		t.Fatal(err)
	}
	parked := filepath.Join(root, "parked-0")
	if err := s.Park(parked, []byte("manifest v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "store-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store's former directory after Park: %v, want moved", err)
	}
	if !Parked(parked) {
		t.Fatal("Parked = false after Park")
	}
	if err := s.Set("a", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Set after Park = %v, want ErrClosed", err)
	}

	r, manifest, err := Reopen(parked, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if string(manifest) != "manifest v1" {
		t.Errorf("manifest = %q", manifest)
	}
	if Parked(parked) {
		t.Error("Parked = true after Reopen: a crash now would leave a store that could be reopened again")
	}
	wrong, missing, extra := 0, 0, 0
	for i := 0; i < n; i++ {
		v, ok, err := r.Get(fmt.Sprint(i))
		switch {
		case err != nil:
			t.Fatal(err)
		case i%7 == 0 && ok:
			extra++
		case i%7 != 0 && !ok:
			missing++
		case i%7 != 0 && !bytes.Equal(v, value(i)):
			wrong++
		}
	}
	if v, ok := get(t, r, "staged"); !ok || v != "last" {
		missing++
	}
	if wrong+missing+extra != 0 {
		t.Errorf("after Reopen: %d wrong, %d missing, %d deleted but present, of %d keys", wrong, missing, extra, n+1)
	}
	if err := r.Set("new", []byte("x")); err != nil { // a reopened store is writable
		t.Fatal(err)
	}
	if v, ok := get(t, r, "new"); !ok || v != "x" {
		t.Errorf("Get after a write to the reopened store = %q, %v", v, ok)
	}
	if err := r.Park(parked, []byte("manifest v2")); err != nil { // parked again in place
		t.Fatal(err)
	}
	r2, manifest, err := Reopen(parked, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if v, ok := get(t, r2, "new"); !ok || v != "x" || string(manifest) != "manifest v2" {
		t.Errorf("after a second Park in place: Get = %q, %v, manifest %q", v, ok, manifest)
	}
}

// TestParkedStoreIsReopenedOnce checks the paths that must not yield a
// usable store: a second Reopen (its manifest is gone), a directory whose
// Park did not finish (no manifest), and a Park onto an existing directory.
// Each removes what it could not use.
func TestParkedStoreIsReopenedOnce(t *testing.T) {
	root := t.TempDir()
	park := func(name string) string {
		s, err := Open(filepath.Join(root, name+"-open"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Set("k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, name)
		if err := s.Park(dir, []byte("m")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	gone := func(dir string) bool { _, err := os.Stat(dir); return errors.Is(err, os.ErrNotExist) }

	dir := park("twice")
	s, _, err := Reopen(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.batch.Close() // a crash: the database is left without Close or Park
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	if Parked(dir) {
		t.Error("Parked = true for a reopened store")
	}
	if _, _, err := Reopen(dir, Options{}); err == nil {
		t.Error("a second Reopen of one Park succeeded")
	} else if !gone(dir) {
		t.Errorf("the failed Reopen left %s", dir)
	}

	dir = park("unfinished")
	if err := os.Remove(filepath.Join(dir, manifestFile)); err != nil { // Park cut short before its last step
		t.Fatal(err)
	}
	if Parked(dir) {
		t.Error("Parked = true without a manifest")
	}
	if _, _, err := Reopen(dir, Options{}); err == nil || !gone(dir) {
		t.Errorf("Reopen without a manifest = %v, directory removed: %v", err, gone(dir))
	}

	taken := park("taken")
	s, err = Open(filepath.Join(root, "second"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Park(taken, []byte("other")); err == nil {
		t.Error("Park onto an existing directory succeeded")
	}
	if !gone(filepath.Join(root, "second")) {
		t.Error("the failed Park left its store's files")
	}
	s, m, err := Reopen(taken, Options{})
	if err != nil || string(m) != "m" {
		t.Fatalf("the directory a failed Park was pointed at: Reopen = %q, %v; want it untouched", m, err)
	}
	s.Close() // before the test's directory goes: Pebble's background work reads its tables
}
