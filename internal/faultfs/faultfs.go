// Package faultfs is a Pebble file system for tests that inject disk
// faults: the operating system's, with a full disk or a hung one armed on
// the table files of matching paths.
package faultfs

import (
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is vfs.Default with switches. Once armed full, creating a table
// (*.sst) under a path containing Match, or writing to one, fails with
// ENOSPC (so no file appears in the directory while the fault holds, and a
// test's cleanup cannot race a flush Pebble retries); armed
// with a stall channel, they wait until it is closed. The zero Match
// matches every path.
type FS struct {
	vfs.FS
	Match string
	mu    sync.Mutex
	full  bool
	stall chan struct{}
	hits  int
}

// New is FS over the operating system's file system, faulting the tables
// under paths that contain match.
func New(match string) *FS { return &FS{FS: vfs.Default, Match: match} }

// Arm sets the fault: full (ENOSPC), or a stall until stall is closed
// (nil: none); Arm(false, nil) disarms.
func (f *FS) Arm(full bool, stall chan struct{}) {
	f.mu.Lock()
	f.full, f.stall = full, stall
	f.mu.Unlock()
}

// Faulted is how many table writes met an armed fault.
func (f *FS) Faulted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

// Create creates a file, faulting its writes when it is a matching table;
// armed full, it refuses to create a matching table.
func (f *FS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	table := strings.Contains(name, f.Match) && strings.HasSuffix(name, ".sst")
	if table {
		f.mu.Lock()
		full := f.full
		if full {
			f.hits++
		}
		f.mu.Unlock()
		if full {
			return nil, &os.PathError{Op: "create", Path: name, Err: syscall.ENOSPC}
		}
	}
	file, err := f.FS.Create(name, c)
	if err != nil || !table {
		return file, err
	}
	return &tableFile{File: file, fs: f}, nil
}

type tableFile struct {
	vfs.File
	fs *FS
}

func (t *tableFile) Write(p []byte) (int, error) {
	t.fs.mu.Lock()
	full, stall := t.fs.full, t.fs.stall
	if full || stall != nil {
		t.fs.hits++
	}
	t.fs.mu.Unlock()
	if stall != nil {
		<-stall
	}
	if full {
		return 0, &os.PathError{Op: "write", Path: "table", Err: syscall.ENOSPC}
	}
	return t.File.Write(p)
}
