// Package residency gives back to the kernel the pages of the running
// executable that the process touched once and will not touch again.
//
// Go runs every package initialiser before main: in cozy-aio, the
// initialisers of about 2,000 packages (Kubernetes API types, protobuf
// registries, CEL, SOPS's cloud clients) touch pages all over the
// binary's code and tables, 58–60 MB of a 113 MB binary, and the
// readahead of those faults maps more. Those pages are clean and
// file-backed, so the kernel would drop them under memory pressure
// anyway; until then they count in the process's resident set and in its
// cgroup's memory. ReleaseExecutable asks the kernel to reclaim them now
// (madvise(MADV_PAGEOUT), Linux 5.4 and later); the pages the process
// uses afterwards come back on their first touch, read from the file as
// when the process started. In make bench-scale (1,000 releases) the
// binary's resident pages peaked at 50 MB instead of 70 MB.
//
// Start-up does not end with the initialisers: discovery, the CRDs, the
// first lists, the first source fetches and Helm actions touch code once
// too. cozy-aio run calls ReleaseExecutable again when its caches have
// synced and a few times after that; the pages it then keeps are the ones
// its work uses (38 MB in the same benchmark).
//
// A page touched for the first time is read with the pages around it
// (readahead), and the kernel maps cached pages around a touched one
// (fault-around), so the resident set is larger than what the process
// touches. ReadExecutableOnDemand (madvise(MADV_RANDOM)) turns the
// readahead off for the executable: with it after the first release,
// the binary's resident pages are 21-31 MB in the same benchmark.
//
// The executable's writable mappings (its data) are left alone, and so
// is every other file: only this process's own copy of its code and
// read-only tables is advised.
package residency

import "fmt"

// Released is what ReleaseExecutable gave back.
type Released struct {
	// Mappings is the number of the executable's read-only mappings
	// advised; Bytes is their total length (not all of it was resident).
	Mappings int
	Bytes    int64
}

func (r Released) String() string {
	return fmt.Sprintf("%d mappings, %.1f MB", r.Mappings, float64(r.Bytes)/(1<<20))
}
