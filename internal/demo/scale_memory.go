package demo

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MemoryUse is cozy-aio's resident memory split as the kernel counts it
// (/proc/PID/status), sampled while the scale shape runs, so that the peak
// can be told apart into the process's own heap and stacks (anonymous) and
// the pages of its binary (file-backed).
type MemoryUse struct {
	// Peak is VmHWM, the kernel's high-water mark of the resident set,
	// read when every unit had settled (Result.PeakRSS).
	Peak int64
	// RSS, Anon, File and Shmem are VmRSS, RssAnon, RssFile and RssShmem
	// at the sample with the largest VmRSS; At is when, from cozy-aio's
	// start. Samples are taken every memorySampleEvery, so RSS can be a
	// little below Peak.
	RSS, Anon, File, Shmem int64
	At                     time.Duration
	// MaxAnon and MaxFile are the largest RssAnon and RssFile of any
	// sample; Samples how many were taken.
	MaxAnon, MaxFile int64
	Samples          int
	// Go is the Go runtime's own account at the last heap profile, taken
	// near the largest sample (Options.Profile only); nil without one.
	Go *GoMemory
	// HeapProfile is the path of that heap profile (pprof format, with
	// inuse_space and alloc_space), "" without one.
	HeapProfile string
}

// GoMemory is part of runtime.MemStats, as /debug/pprof/heap?debug=1
// prints it.
type GoMemory struct {
	// HeapInuse is the heap's spans in use; HeapIdle minus HeapReleased
	// is what the heap holds free but has not returned to the kernel;
	// StackInuse the goroutine stacks; Sys everything the runtime got from
	// the kernel; NextGC the heap size that starts the next collection.
	HeapAlloc, HeapInuse, HeapIdle, HeapReleased, StackInuse, Sys, NextGC int64
	NumGC                                                                 int64
	// MSpanInuse, GCSys, BuckHashSys (the profiler's buckets) and
	// OtherSys are the runtime's own structures.
	MSpanInuse, GCSys, BuckHashSys, OtherSys int64
}

// memorySampleEvery is how often the sampler reads /proc/PID/status.
const memorySampleEvery = 100 * time.Millisecond

// heapProfileStep is how much VmRSS must have grown since the last heap
// profile for the sampler to take another: a few profiles per run, the
// last one near the peak.
const heapProfileStep = 6 << 20

// memorySampler samples one process's memory until stopped.
type memorySampler struct {
	pid     int
	started time.Time
	// health is the process's /debug/pprof address and logs where the heap
	// profile goes; profile is false to take none.
	health, logs string
	profile      bool
	stop, done   chan struct{}
	use          MemoryUse
}

func startMemorySampler(pid int, health, logs string, profile bool) *memorySampler {
	s := &memorySampler{pid: pid, started: time.Now(), health: health, logs: logs, profile: profile,
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *memorySampler) run() {
	defer close(s.done)
	tick := time.NewTicker(memorySampleEvery)
	defer tick.Stop()
	var profiled int64
	for {
		s.sample()
		if s.profile && s.use.RSS >= profiled+heapProfileStep {
			// The profile of the largest sample so far: a later, larger
			// sample replaces it.
			profiled = s.use.RSS
			if g, err := s.heapProfile(); err == nil {
				s.use.Go, s.use.HeapProfile = g, filepath.Join(s.logs, "cozy-aio.heap.pprof")
			}
		}
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}

// sample reads /proc/PID/status once.
func (s *memorySampler) sample() {
	st, err := procStatus(s.pid)
	if err != nil {
		return
	}
	s.use.Samples++
	s.use.MaxAnon, s.use.MaxFile = max(s.use.MaxAnon, st["RssAnon"]), max(s.use.MaxFile, st["RssFile"])
	if st["VmRSS"] > s.use.RSS {
		s.use.RSS, s.use.Anon, s.use.File, s.use.Shmem = st["VmRSS"], st["RssAnon"], st["RssFile"], st["RssShmem"]
		s.use.At = time.Since(s.started)
	}
	s.use.Peak = max(s.use.Peak, st["VmHWM"])
}

// finish stops the sampler and returns what it measured, with VmHWM read
// once more.
func (s *memorySampler) finish() MemoryUse {
	close(s.stop)
	<-s.done
	s.sample()
	return s.use
}

// heapProfile writes cozy-aio's heap profile (pprof format) to
// logs/cozy-aio.heap.pprof and returns the runtime's account from the
// same endpoint's text form.
func (s *memorySampler) heapProfile() (*GoMemory, error) {
	c := &http.Client{Timeout: 30 * time.Second}
	get := func(url string) ([]byte, error) {
		resp, err := c.Get(url)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: %s", url, resp.Status)
		}
		return io.ReadAll(resp.Body)
	}
	b, err := get("http://" + s.health + "/debug/pprof/heap")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(s.logs, "cozy-aio.heap.pprof"), b, 0o644); err != nil {
		return nil, err
	}
	text, err := get("http://" + s.health + "/debug/pprof/heap?debug=1")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(s.logs, "cozy-aio.heap.txt"), text, 0o644); err != nil {
		return nil, err
	}
	return parseMemStats(text), nil
}

// parseMemStats reads the "# Name = value" lines that end the text form
// of a Go heap profile.
func parseMemStats(text []byte) *GoMemory {
	g := &GoMemory{}
	fields := map[string]*int64{
		"HeapAlloc": &g.HeapAlloc, "HeapInuse": &g.HeapInuse, "HeapIdle": &g.HeapIdle,
		"HeapReleased": &g.HeapReleased, "Stack": &g.StackInuse, "Sys": &g.Sys, "NextGC": &g.NextGC, "NumGC": &g.NumGC,
		"MSpan": &g.MSpanInuse, "GCSys": &g.GCSys, "BuckHashSys": &g.BuckHashSys, "OtherSys": &g.OtherSys,
	}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		l, ok := strings.CutPrefix(sc.Text(), "# ")
		if !ok {
			continue
		}
		name, value, ok := strings.Cut(l, " = ")
		if p := fields[name]; ok && p != nil {
			// "Stack = 1234 / 5678": in use, then obtained.
			v, _, _ := strings.Cut(value, " ")
			*p, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return g
}

// procStatus reads the memory lines of /proc/PID/status, in bytes.
func procStatus(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				out[strings.TrimSuffix(f[0], ":")] = kb << 10
			}
		}
	}
	return out, nil
}

// String is the summary's line.
func (m MemoryUse) String() string {
	mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }
	s := fmt.Sprintf("cozy-aio memory at its largest sample (%.1fs after its start, %d samples): VmRSS %s of VmHWM %s = anonymous %s + file-backed %s + shmem %s; largest anonymous %s, largest file-backed %s",
		m.At.Seconds(), m.Samples, mb(m.RSS), mb(m.Peak), mb(m.Anon), mb(m.File), mb(m.Shmem), mb(m.MaxAnon), mb(m.MaxFile))
	if g := m.Go; g != nil {
		s += fmt.Sprintf("\nGo runtime at the last heap profile (%s): heap in use %s (live objects %s), heap free but not returned %s, stacks %s, runtime structures %s (spans %s, GC %s, profiler %s, other %s), obtained from the kernel %s, next GC at %s, %d GCs",
			m.HeapProfile, mb(g.HeapInuse), mb(g.HeapAlloc), mb(g.HeapIdle-g.HeapReleased), mb(g.StackInuse),
			mb(g.MSpanInuse+g.GCSys+g.BuckHashSys+g.OtherSys), mb(g.MSpanInuse), mb(g.GCSys), mb(g.BuckHashSys), mb(g.OtherSys), mb(g.Sys), mb(g.NextGC), g.NumGC)
	}
	return s
}

// installBinary copies the cozy-aio binary to dst and drops the copy from
// the page cache, so that the process reads it from disk as a node does
// after a boot (or from an image layer unpacked earlier), and returns dst.
// How many of a binary's pages a process maps depends on the size of the
// page cache's folios holding the file: this kernel (6.18) maps a large
// folio whole when one of its pages is touched, so that the same binary
// starts with 58–60 MB file-backed when read cold or written in 4–64 KB
// writes, 75 MB as the Go linker wrote it (through a shared mapping), and
// 93 MB when written in 1 MB writes (docs/benchmarks/scale.md, session 8).
func installBinary(src, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	// Only clean pages leave the page cache: write them out first.
	if err := out.Sync(); err != nil {
		out.Close()
		return "", err
	}
	if err := dropPageCache(out); err != nil {
		out.Close()
		return "", fmt.Errorf("dropping %s from the page cache: %w", dst, err)
	}
	return dst, out.Close()
}
