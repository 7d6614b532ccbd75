package residency

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestReadOnlyMappings(t *testing.T) {
	maps := `00400000-01a00000 r-xp 00000000 fd:01 123 /usr/local/bin/cozy-aio
01a00000-02e00000 r--p 01600000 fd:01 123 /usr/local/bin/cozy-aio
02e00000-02f00000 rw-p 02a00000 fd:01 123 /usr/local/bin/cozy-aio
02f00000-03000000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--p 00000000 fd:01 456 /usr/local/bin/cozy-aio-other
7f0000002000-7f0000003000 r--p 00000000 fd:01 789 /opt/with space/cozy-aio
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
`
	got, err := readOnlyMappings([]byte(maps), "/usr/local/bin/cozy-aio")
	if err != nil {
		t.Fatal(err)
	}
	want := []addrRange{{0x400000, 0x1a00000}, {0x1a00000, 0x2e00000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("mappings %x, want %x", got, want)
	}
	if got, _ := readOnlyMappings([]byte(maps), "/opt/with space/cozy-aio"); len(got) != 1 {
		t.Fatalf("a path with a space: %x", got)
	}
	if _, err := readOnlyMappings([]byte("zz-01 r-xp 0 fd:01 1 /x\n"), "/x"); err == nil {
		t.Fatal("a bad address was accepted")
	}
}

// TestReleaseExecutable: the test binary's file-backed resident pages
// fall when they are released.
func TestReleaseExecutable(t *testing.T) {
	before := rssFile(t)
	r, err := ReleaseExecutable()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	t.Logf("released %s: RssFile %d kB -> %d kB", r, before, after)
	if r.Mappings == 0 || after >= before {
		t.Fatalf("released %s: RssFile %d kB -> %d kB, want it lower", r, before, after)
	}
}

func rssFile(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func TestReadExecutableOnDemand(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	// Without the advice (as the process starts) no mapping has the flag;
	// -count=2 runs this again in the same process.
	before := randomReadMappings(t, exe)
	r, err := ReadExecutableOnDemand()
	if err != nil {
		t.Fatal(err)
	}
	if n := randomReadMappings(t, exe); r.Mappings == 0 || n != r.Mappings {
		t.Fatalf("advised %s; %d read-only mappings of %s have the random-read flag (rr), want %d", r, n, exe, r.Mappings)
	}
	t.Logf("advised %s; mappings with rr: %d before, %d after", r, before, r.Mappings)
}

// randomReadMappings counts the read-only mappings of path whose VmFlags
// in /proc/self/smaps carry rr (MADV_RANDOM).
func randomReadMappings(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	n, ours := 0, false
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			ours = len(f) >= 6 && strings.Join(f[5:], " ") == path && len(f[1]) > 1 && f[1][1] != 'w'
		case ours && len(f) > 0 && f[0] == "VmFlags:":
			for _, fl := range f[1:] {
				if fl == "rr" {
					n++
				}
			}
		}
	}
	return n
}
