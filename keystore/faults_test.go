package keystore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/driftstream/driftstream/internal/faultfs"
)

// fill writes records until a call fails or n are written.
func fill(s *Store, n int) error {
	v := make([]byte, 1024)
	for i := range n {
		if err := s.Set(fmt.Sprint(i), v); err != nil {
			return err
		}
		if i%100 == 0 {
			if err := s.Flush(); err != nil {
				return err
			}
		}
	}
	return s.Flush()
}

// A full disk fails the store: Pebble's flush fails in the background,
// and every later call returns ErrFailed with the cause, instead of writes
// waiting in Pebble's stall while it retries the flush forever. Closing
// does not wait for those retries.
func TestFullDiskFailsTheStore(t *testing.T) {
	fs := faultfs.New("")
	s, err := Open(filepath.Join(t.TempDir(), "p0"), Options{MemTableBytes: 256 << 10, BatchBytes: 32 << 10, StallTimeout: 5 * time.Second, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	fs.Arm(true, nil)
	err = fill(s, 20_000)
	if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writes on a full disk: %v, want ErrFailed with ENOSPC", err)
	}
	if _, _, err := s.Get("1"); !errors.Is(err, ErrFailed) {
		t.Fatalf("Get after the failure: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for Pebble's flush retries")
	}
}

// A commit stalled past StallTimeout fails, and so does the store, instead
// of stalling the partition forever.
func TestStalledWriteFailsTheStore(t *testing.T) {
	fs := faultfs.New("")
	s, err := Open(filepath.Join(t.TempDir(), "p0"), Options{MemTableBytes: 256 << 10, BatchBytes: 32 << 10, StallTimeout: time.Second, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	stall := make(chan struct{})
	defer close(stall) // let Pebble's goroutines finish
	fs.Arm(false, stall)
	start := time.Now()
	err = fill(s, 20_000)
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "write stall") {
		t.Fatalf("writes with the disk stalled: %v, want a stall failure", err)
	}
	t.Logf("failed after %s", time.Since(start).Round(time.Millisecond))
	if err := s.Set("x", []byte("y")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Set after the failure: %v", err)
	}
	s.Close()
}

// A parked store whose MANIFEST lost its last record (Pebble reads a bad
// record at the end as the end of the log, and opens the database as it was
// before the park's last flush) is refused with ErrDamaged and removed; so
// is one whose table was removed or cut.
func TestReopenRefusesADamagedParkedStore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		park   func(t *testing.T) string
		damage func(t *testing.T, dir string)
		frag   string // in the error: who caught it
	}{
		{"manifest lost the park's flush", twoFlushes, func(t *testing.T, dir string) {
			m := only(t, dir, "MANIFEST-")
			b, _ := os.ReadFile(m)
			b[len(b)-3] ^= 0xff
			os.WriteFile(m, b, 0o644)
		}, "Pebble opens tables"},
		{"manifest's last record corrupt", parkedStore, func(t *testing.T, dir string) {
			m := only(t, dir, "MANIFEST-")
			b, _ := os.ReadFile(m)
			b[len(b)-3] ^= 0xff
			os.WriteFile(m, b, 0o644)
		}, ""},
		{"manifest cut", parkedStore, func(t *testing.T, dir string) {
			m := only(t, dir, "MANIFEST-")
			b, _ := os.ReadFile(m)
			os.WriteFile(m, b[:len(b)-10], 0o644)
		}, ""},
		{"a table removed", parkedStore, func(t *testing.T, dir string) {
			tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
			os.Remove(tables[len(tables)-1])
		}, ""},
		{"a table cut", parkedStore, func(t *testing.T, dir string) {
			tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
			b, _ := os.ReadFile(tables[0])
			os.WriteFile(tables[0], b[:len(b)/2], 0o644)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.park(t)
			tc.damage(t, dir)
			s, _, err := Reopen(dir, Options{})
			if err == nil {
				n := 0
				for i := range 3000 {
					if _, ok, _ := s.Get(fmt.Sprint(i)); ok {
						n++
					}
				}
				s.Close()
				t.Fatalf("a damaged parked store reopened, holding %d of 3000 keys", n)
			}
			if _, serr := os.Stat(dir); !os.IsNotExist(serr) || !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), tc.frag) {
				t.Fatalf("left at %s: %v; error %v, want ErrDamaged naming %q", dir, !os.IsNotExist(serr), err, tc.frag)
			}
			t.Log(err)
		})
	}
}

// parkedStore parks a store of 3,000 keys written over several flushes.
func parkedStore(t *testing.T) string {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "p0"), Options{MemTableBytes: 256 << 10, BatchBytes: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := fill(s, 3000); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 { // overwrite some after the first tables
		if err := s.Set(fmt.Sprint(i), []byte("late")); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "parked")
	if err := s.Park(dir, []byte("manifest")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// twoFlushes parks a store of two tables: 100 keys flushed, then the same
// keys overwritten and flushed by the park. The MANIFEST's last record adds
// the second table; without it the store opens with the first values.
func twoFlushes(t *testing.T) string {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "p0"), Options{noCompactions: true}) // both tables stay
	if err != nil {
		t.Fatal(err)
	}
	for gen := range 2 {
		for i := range 100 {
			if err := s.Set(fmt.Sprint(i), []byte(fmt.Sprint("gen", gen))); err != nil {
				t.Fatal(err)
			}
		}
		if gen == 0 {
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := filepath.Join(t.TempDir(), "parked")
	if err := s.Park(dir, []byte("manifest")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func only(t *testing.T, dir, prefix string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, prefix+"*"))
	if len(m) != 1 {
		t.Fatalf("%d files %s* in %s", len(m), prefix, dir)
	}
	return m[0]
}

// A corrupt data block makes the call that reads it fail, and the store
// with it; it never panics the process.
func TestCorruptBlockFailsTheCallNotTheProcess(t *testing.T) {
	dir := parkedStore(t)
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	for _, path := range tables {
		b, _ := os.ReadFile(path)
		for i := 100; i < len(b)/2; i += 97 { // the data blocks come first
			b[i] ^= 0x5a
		}
		os.WriteFile(path, b, 0o644)
	}
	s, _, err := Reopen(dir, Options{})
	if err != nil {
		t.Logf("refused at reopen: %v", err)
		return
	}
	defer s.Close()
	var failed error
	for i := range 3000 {
		if _, _, err := s.Get(fmt.Sprint(i)); err != nil {
			failed = err
			break
		}
	}
	if failed == nil {
		t.Fatal("every key read from corrupt tables")
	}
	t.Log(failed)
}

// stalling is a file system whose opening (on "open") or creating (on
// "create") of a file named like name waits until stall is closed: a disk
// that hangs while a store is opened. Listing a parked store's tables only
// opens its MANIFEST; opening the store read-write creates a new one.
type stalling struct {
	vfs.FS
	on, name string
	stall    chan struct{}
}

func (f stalling) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if f.on == "open" && strings.Contains(filepath.Base(name), f.name) {
		<-f.stall
	}
	return f.FS.Open(name, opts...)
}

func (f stalling) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if f.on == "create" && strings.Contains(filepath.Base(name), f.name) {
		<-f.stall
	}
	return f.FS.Create(name, c)
}

// Opening a parked store waits in Pebble no longer than the stall bound,
// whether listing its tables or opening it hangs (a hung disk, or Pebble
// waiting for good on a damaged table): the store is refused, and the
// partition restores from the changelog.
func TestReopenIsBoundedByTheStallTimeout(t *testing.T) {
	for _, tc := range []struct{ on, want string }{{"open", "listing the tables waited"}, {"create", "opening waited"}} {
		t.Run(tc.on, func(t *testing.T) {
			dir := parkedStore(t)
			stall := make(chan struct{})
			defer close(stall) // let Pebble's goroutine finish
			start := time.Now()
			s, _, err := Reopen(dir, Options{StallTimeout: 300 * time.Millisecond, FS: stalling{FS: vfs.Default, on: tc.on, name: "MANIFEST", stall: stall}})
			if err == nil {
				s.Close()
				t.Fatal("reopened while the disk hung")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("reopen with the disk hung: %v, want %q", err, tc.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("refused after %s", d)
			}
		})
	}
}
