//go:build linux && (amd64 || arm64)

package demo

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// TestInstallBinaryLeavesNothingCached: the copy the scale shape runs is
// read from disk by its first exec, as on a node, not taken from pages
// the copy left in the page cache.
func TestInstallBinaryLeavesNothingCached(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, bytes.Repeat([]byte{0x90}, 8<<20), 0o755); err != nil {
		t.Fatal(err)
	}
	dst, err := installBinary(src, filepath.Join(t.TempDir(), "cozy-aio"))
	if err != nil {
		t.Fatal(err)
	}
	resident, total := residentPages(t, dst)
	if resident > total/8 {
		t.Fatalf("%d of %d pages of the copy still in the page cache, want (nearly) none", resident, total)
	}
	// The check itself can see cached pages: the source was just written.
	if resident, total := residentPages(t, src); resident < total/2 {
		t.Fatalf("only %d of %d pages of the freshly written source resident: the check cannot tell", resident, total)
	}
}

// residentPages counts the pages of path in the page cache (mincore).
func residentPages(t *testing.T, path string) (resident, total int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		if v&1 != 0 {
			resident++
		}
	}
	return resident, len(vec)
}
