package demo

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestScaleMemorySampler samples this test process as the scale shape
// samples cozy-aio: its resident memory split into anonymous and
// file-backed pages, and a heap profile with the Go runtime's account from
// a real /debug/pprof/heap.
func TestScaleMemorySampler(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	logs := t.TempDir()

	s := startMemorySampler(os.Getpid(), strings.TrimPrefix(srv.URL, "http://"), logs, true)
	time.Sleep(3 * memorySampleEvery)
	m := s.finish()

	if m.Samples < 2 {
		t.Fatalf("%d samples in %s, want several", m.Samples, 3*memorySampleEvery)
	}
	if m.Anon <= 0 || m.File <= 0 || m.RSS <= 0 {
		t.Errorf("RSS %d = anon %d + file %d: want each above zero", m.RSS, m.Anon, m.File)
	}
	if m.RSS < m.Anon+m.File || m.RSS > m.Peak || m.MaxAnon < m.Anon || m.MaxFile < m.File {
		t.Errorf("inconsistent sample: %+v", m)
	}
	if m.Go == nil || m.HeapProfile != filepath.Join(logs, "cozy-aio.heap.pprof") {
		t.Fatalf("no heap profile taken: %+v", m)
	}
	g := m.Go
	if g.HeapInuse <= 0 || g.HeapAlloc <= 0 || g.HeapAlloc > g.HeapInuse || g.Sys < g.HeapInuse || g.StackInuse <= 0 || g.NextGC <= 0 || g.GCSys <= 0 || g.MSpanInuse <= 0 {
		t.Errorf("Go runtime account %+v: want heap in use, live objects within it, stacks, and the total above the heap", *g)
	}
	b, err := os.ReadFile(m.HeapProfile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("the heap profile is not gzip-compressed pprof: %q", b[:min(len(b), 16)])
	}
	if line := m.String(); !strings.Contains(line, "anonymous") || !strings.Contains(line, "file-backed") || !strings.Contains(line, "heap in use") {
		t.Errorf("summary line %q", line)
	}
}

// TestParseMemStats reads the runtime's account from the end of a heap
// profile's text form.
func TestParseMemStats(t *testing.T) {
	g := parseMemStats([]byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 10\n# HeapAlloc = 100\n# Sys = 9000\n# HeapIdle = 400\n# HeapInuse = 300\n# HeapReleased = 250\n# Stack = 64 / 128\n# MSpan = 11 / 22\n# BuckHashSys = 33\n# GCSys = 44\n# OtherSys = 55\n# NextGC = 200\n# NumGC = 7\n"))
	want := GoMemory{HeapAlloc: 100, HeapInuse: 300, HeapIdle: 400, HeapReleased: 250, StackInuse: 64, Sys: 9000, NextGC: 200, NumGC: 7,
		MSpanInuse: 11, BuckHashSys: 33, GCSys: 44, OtherSys: 55}
	if *g != want {
		t.Errorf("got %+v, want %+v", *g, want)
	}
}

// TestInstallBinary copies a binary byte for byte, executable.
func TestInstallBinary(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	want := bytes.Repeat([]byte("cozy-aio\x00"), 300_000) // over one 1 MB buffer
	if err := os.WriteFile(src, want, 0o755); err != nil {
		t.Fatal(err)
	}
	dst, err := installBinary(src, filepath.Join(t.TempDir(), "bin", "cozy-aio"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("copy of %d bytes differs from the %d-byte source", len(got), len(want))
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("copy not executable: %v %v", fi.Mode(), err)
	}
	if _, err := installBinary(filepath.Join(t.TempDir(), "missing"), dst); err == nil {
		t.Fatal("a missing source copied without an error")
	}
}
