package residency

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ReleaseExecutable advises the kernel to page out the running
// executable's read-only file mappings (its code, read-only data and
// tables). Writable mappings are left alone: their touched pages are the
// process's own copies. It returns an error when the kernel refuses the
// advice (before Linux 5.4: EINVAL), after trying every mapping.
func ReleaseExecutable() (Released, error) {
	return adviseExecutable(unix.MADV_PAGEOUT, "MADV_PAGEOUT")
}

// ReadExecutableOnDemand advises the kernel that the executable's
// read-only mappings are read at random (madvise(MADV_RANDOM)): a page
// touched for the first time is read alone, without the pages around it,
// so that what stays resident is what the process touches.
func ReadExecutableOnDemand() (Released, error) {
	return adviseExecutable(unix.MADV_RANDOM, "MADV_RANDOM")
}

func adviseExecutable(advice int, name string) (Released, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return Released{}, err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return Released{}, err
	}
	ranges, err := readOnlyMappings(maps, exe)
	if err != nil {
		return Released{}, err
	}
	var out Released
	var first error
	for _, r := range ranges {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, r.start, r.end-r.start, uintptr(advice)); errno != 0 {
			if first == nil {
				first = fmt.Errorf("madvise(%s) of %s at %#x: %w", name, exe, r.start, errno)
			}
			continue
		}
		out.Mappings++
		out.Bytes += int64(r.end - r.start)
	}
	return out, first
}

type addrRange struct{ start, end uintptr }

// readOnlyMappings parses /proc/self/maps for the mappings of path that
// are not writable.
func readOnlyMappings(maps []byte, path string) ([]addrRange, error) {
	var out []addrRange
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// address perms offset dev inode pathname
		f := strings.Fields(sc.Text())
		if len(f) < 6 || strings.Join(f[5:], " ") != path || len(f[1]) < 2 || f[1][1] == 'w' {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("/proc/self/maps: address %q", f[0])
		}
		start, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/self/maps: address %q: %w", f[0], err)
		}
		end, err := strconv.ParseUint(hi, 16, 64)
		if err != nil || end < start {
			return nil, fmt.Errorf("/proc/self/maps: address %q", f[0])
		}
		out = append(out, addrRange{uintptr(start), uintptr(end)})
	}
	return out, sc.Err()
}
