package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// tearProxy stands between the members and the broker (which advertises the
// proxy's port: kafka-broker.sh's DRIFTSTREAM_KAFKA_ADVERTISED_PORT) and
// kills a member inside a checkpoint's write on purpose: armed, it lets the
// next produce request to the changelog that holds key records but neither
// the checkpoint's marker nor an ownership claim reach the broker whole, then
// kills (SIGKILL) the process that sent it, found through the connection in
// /proc. The checkpoint is then torn: some key records durable, no marker.
type tearProxy struct {
	ln        net.Listener
	target    string
	changelog atomic.Pointer[[]byte] // the changelog topic's name
	armed     atomic.Bool
	killed    chan int // the pids killed, one per arming
	wg        sync.WaitGroup
}

// The record keys of markers and ownership claims (checkpoint's reserved
// keys), as they appear in a produce request's records.
var (
	markerKeyBytes = []byte("\x00driftstream-marker-")
	ownerKeyBytes  = []byte("\x00driftstream-owner-")
)

func startTearProxy(t *testing.T, listen, target string) *tearProxy {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("the chaos run's proxy: %v", err)
	}
	p := &tearProxy{ln: ln, target: target, killed: make(chan int, 1)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

// pipe forwards one client connection, request by request.
func (p *tearProxy) pipe(c net.Conn) {
	defer c.Close()
	b, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer b.Close()
	go func() { io.Copy(c, b); c.Close() }()
	r := bufio.NewReader(c)
	var size [4]byte
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		changelog := p.changelog.Load()
		tear := len(frame) > 2 && binary.BigEndian.Uint16(frame) == 0 && changelog != nil && // Produce
			bytes.Contains(frame, *changelog) && !bytes.Contains(frame, markerKeyBytes) && !bytes.Contains(frame, ownerKeyBytes)
		if _, err := b.Write(append(size[:], frame...)); err != nil {
			return
		}
		if tear && p.armed.CompareAndSwap(true, false) {
			pid := connPID(c.RemoteAddr().(*net.TCPAddr).Port, p.ln.Addr().(*net.TCPAddr).Port)
			if pid <= 0 { // the sender is not found (gone already): the next one
				p.armed.Store(true)
				continue
			}
			syscall.Kill(pid, syscall.SIGKILL)
			p.killed <- pid
			return
		}
	}
}

// connPID is the process whose TCP connection from local port from to port
// to (both on 127.0.0.1) is open: /proc/net/tcp names the socket's inode,
// and one process's fd links to it. 0 when none is found.
func connPID(from, to int) int {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0
	}
	want := fmt.Sprintf("0100007F:%04X", from)
	peer := fmt.Sprintf("0100007F:%04X", to)
	inode := ""
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == want && f[2] == peer {
			inode = f[9]
		}
	}
	if inode == "" {
		return 0
	}
	link := "socket:[" + inode + "]"
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && l == link {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid
		}
	}
	return 0
}
