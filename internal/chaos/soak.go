package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"helm.sh/helm/v4/pkg/storage/driver"
	kwait "k8s.io/apimachinery/pkg/util/wait"
)

// SoakOptions size a soak: Releases HelmReleases through Rounds rounds
// of values changes, cozy-aio sampled every Every.
type SoakOptions struct {
	Releases, Rounds int
	// Every is the sampling interval. Default: 10s.
	Every time.Duration
	// Round bounds the wait for one round. Default: 15m.
	Round time.Duration
	// Binary, WorkDir, Shards, Workers, Out: see EnvOptions.
	Binary, WorkDir string
	Shards, Workers int
	Out             io.Writer
}

// Sample is cozy-aio's resources at one moment of a soak.
type Sample struct {
	At    time.Duration
	Round int
	// RSS is the resident memory (VmRSS), FDs the open descriptors,
	// Goroutines go_goroutines and Heap go_memstats_heap_inuse_bytes from
	// its /metrics (what the Go heap holds, of RSS).
	RSS, Heap       int64
	FDs, Goroutines int
}

// SoakReport is a soak's samples and how long each round took.
type SoakReport struct {
	Samples []Sample
	Rounds  []time.Duration
	// Violations are the invariants that did not hold at the end.
	Violations []Violation
}

// Soak runs a soak and returns its samples; the error says when a round
// did not finish or an invariant did not hold at the end.
func Soak(ctx context.Context, o SoakOptions) (*SoakReport, error) {
	if o.Every <= 0 {
		o.Every = 10 * time.Second
	}
	if o.Round <= 0 {
		o.Round = 15 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	env, err := StartEnv(ctx, EnvOptions{Binary: o.Binary, WorkDir: o.WorkDir, Shards: o.Shards, Workers: o.Workers, Out: o.Out})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	w := NewWorkload(env, rand.New(rand.NewPCG(1, 2)), o.Releases, 0, false)
	rep := &SoakReport{}
	start := time.Now()
	var mu sync.Mutex
	round := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(o.Every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			s := sampleProcess(env.Cozy.Pid(), env.Cozy.HealthAddr())
			mu.Lock()
			s.At, s.Round = time.Since(start), round
			rep.Samples = append(rep.Samples, s)
			mu.Unlock()
		}
	})
	defer func() { close(stop); wg.Wait() }()
	if err := w.Create(ctx); err != nil {
		return rep, err
	}
	for r := 0; r <= o.Rounds; r++ {
		mu.Lock()
		round = r
		mu.Unlock()
		began := time.Now()
		if r > 0 {
			if err := w.UpgradeAll(ctx); err != nil {
				return rep, err
			}
		}
		if err := waitAllReady(ctx, env, o.Round); err != nil {
			return rep, fmt.Errorf("soak round %d of %d releases: %w", r, o.Releases, err)
		}
		rep.Rounds = append(rep.Rounds, time.Since(began))
		env.Say("soak round %d: %d HelmReleases Ready in %.1fs", r, o.Releases, time.Since(began).Seconds())
		if err := saveHeapProfile(ctx, env.Cozy.HealthAddr(), filepath.Join(env.Logs, fmt.Sprintf("soak-round-%02d.heap.pprof", r))); err != nil {
			env.Say("soak round %d: no heap profile: %v", r, err)
		}
	}
	snap, err := ReadSnapshot(ctx, env.C, driver.NewSecrets(env.Kube.CoreV1().Secrets("")), w.Namespaces)
	if err == nil {
		rep.Violations = Check(snap)
	}
	rep.Print(o.Out)
	if len(rep.Violations) > 0 {
		return rep, fmt.Errorf("soak: %d invariants do not hold: %s", len(rep.Violations), firstN(rep.Violations, 5))
	}
	return rep, err
}

// UpgradeAll changes every release's values.
func (w *Workload) UpgradeAll(ctx context.Context) error {
	for _, k := range w.releaseKeys() {
		r := w.releases[k]
		if r.deleted {
			continue
		}
		r.round++
		if err := w.update(ctx, r); err != nil {
			return err
		}
		w.Ops["upgrade"]++
	}
	return nil
}

// waitAllReady waits until every HelmRelease is Ready at its generation.
func waitAllReady(ctx context.Context, env *Env, d time.Duration) error {
	var waiting int
	err := kwait.PollUntilContextTimeout(ctx, 2*time.Second, d, true, func(ctx context.Context) (bool, error) {
		var hrs helmv2.HelmReleaseList
		if err := env.C.List(ctx, &hrs); err != nil {
			return false, nil
		}
		waiting = 0
		for _, hr := range hrs.Items {
			if !isReady(hr.Status.Conditions) || hr.Status.ObservedGeneration != hr.Generation {
				waiting++
			}
		}
		return waiting == 0 && len(hrs.Items) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d HelmReleases not Ready: %w", waiting, err)
	}
	return nil
}

// saveHeapProfile writes cozy-aio's heap profile (after a GC) to path,
// for comparing what the heap holds round after round
// (go tool pprof -base soak-round-05.heap.pprof soak-round-10.heap.pprof).
func saveHeapProfile(ctx context.Context, health, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+health+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/heap: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sampleProcess reads a process's resident memory and descriptors from
// /proc and its goroutines from its /metrics.
func sampleProcess(pid int, health string) Sample {
	var s Sample
	if pid == 0 {
		return s
	}
	if f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				s.RSS = kb << 10
			}
		}
		f.Close()
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		s.FDs = len(fds)
	}
	if text, err := readMetrics(context.Background(), health); err == nil {
		for _, l := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
				s.Goroutines, _ = strconv.Atoi(strings.TrimSpace(v))
			}
			if v, ok := strings.CutPrefix(l, "go_memstats_heap_inuse_bytes "); ok {
				f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				s.Heap = int64(f)
			}
		}
	}
	return s
}

// AtRound is the last sample taken during round r.
func (r *SoakReport) AtRound(round int) (Sample, bool) {
	var out Sample
	found := false
	for _, s := range r.Samples {
		if s.Round == round {
			out, found = s, true
		}
	}
	return out, found
}

// Print writes the samples at each round's end.
func (r *SoakReport) Print(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUND\tTOOK\tRSS\tHEAP IN USE\tGOROUTINES\tFDS\t(last sample of the round)")
	for i, d := range r.Rounds {
		s, ok := r.AtRound(i)
		if !ok {
			fmt.Fprintf(tw, "%d\t%.1fs\t-\t-\t-\t-\t\n", i, d.Seconds())
			continue
		}
		fmt.Fprintf(tw, "%d\t%.1fs\t%.0f MB\t%.0f MB\t%d\t%d\t\n", i, d.Seconds(), float64(s.RSS)/(1<<20), float64(s.Heap)/(1<<20), s.Goroutines, s.FDs)
	}
	tw.Flush()
}
