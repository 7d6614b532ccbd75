//go:build linux && (amd64 || arm64)

package demo

import (
	"os"
	"syscall"
)

// dropPageCache asks the kernel to drop f's clean pages from the page
// cache (posix_fadvise POSIX_FADV_DONTNEED).
func dropPageCache(f *os.File) error {
	const dontNeed = 4 // POSIX_FADV_DONTNEED
	_, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, dontNeed, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
