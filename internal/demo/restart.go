package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Restart is one restart of cozy-aio on a settled cluster (the scale
// shape with Options.Restart): the process is stopped with SIGTERM and
// started again on the same cluster, with its data directory kept or
// emptied.
type Restart struct {
	// Name says which: "same data directory" or "empty data directory".
	Name string
	// Confirmed is the time from the new process's start until every
	// HelmRelease was confirmed: the process's shards ran as many Helm
	// runs successfully as there are releases
	// (cozy_aio_tenant_runs_succeeded_total, each run being one release's
	// in-sync check or action) and every unit is Ready. Zero when it did
	// not happen within the timeout.
	Confirmed time.Duration
	// Runs is the number of successful Helm runs at that moment.
	Runs int
	// Requests are the new process's API requests, from the audit log,
	// until two seconds after Confirmed (so that the status writes of
	// the last runs are counted).
	Requests Requests
	// Revisions is the number of release revisions (Secrets labelled
	// owner=helm) written by the restart: the count after it less the
	// count before.
	Revisions int
	// CPU is the new process's CPU time and PeakRSS its peak resident
	// memory, both when Requests were counted.
	CPU     time.Duration
	PeakRSS int64
}

// IdleCost is what cozy-aio costs with nothing changing (Options.Idle).
type IdleCost struct {
	// Duration is how long the harness watched without touching anything
	// (not even /metrics).
	Duration time.Duration
	// CPU is cozy-aio's CPU time over Duration; APIServer and Etcd are
	// those processes'.
	CPU, APIServer, Etcd time.Duration
	// Requests are cozy-aio's API requests over Duration, from the audit
	// log.
	Requests Requests
	// RSS is cozy-aio's resident memory (VmRSS) at the end.
	RSS int64
}

// PerMinute scales a CPU time over the idle window to a minute.
func (c IdleCost) PerMinute(d time.Duration) time.Duration {
	if c.Duration <= 0 {
		return 0
	}
	return time.Duration(float64(d) * float64(time.Minute) / float64(c.Duration))
}

// restartPoll is how often a restart looks for every release confirmed:
// each look reads the whole /metrics exposition (1.5 MB at 1,000
// releases), so not as often as the settle check.
const restartPoll = 250 * time.Millisecond

// restarts stops cozy-aio and starts it again twice on the settled scale
// shape: with its data directory, then with an empty one.
func (h *harness) restarts(ctx context.Context) error {
	for _, empty := range []bool{false, true} {
		r, err := h.restart(ctx, empty)
		if r != nil {
			h.res.Restarts = append(h.res.Restarts, *r)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (h *harness) releaseRevisions(ctx context.Context) (int, error) {
	var secrets corev1.SecretList
	if err := h.c.List(ctx, &secrets, client.MatchingLabels{"owner": "helm"}); err != nil {
		return 0, err
	}
	return len(secrets.Items), nil
}

func (h *harness) restart(ctx context.Context, empty bool) (*Restart, error) {
	rep := h.reps[0]
	res := &Restart{Name: "same data directory"}
	if empty {
		res.Name = "empty data directory"
	}
	before, err := h.releaseRevisions(ctx)
	if err != nil {
		return res, err
	}
	h.say("restart (%s): stopping cozy-aio with SIGTERM", res.Name)
	rep.killed = time.Now()
	rep.stop(30 * time.Second)
	if empty {
		data := filepath.Join(h.opts.WorkDir, "data")
		if err := os.RemoveAll(data); err != nil {
			return res, err
		}
		if err := os.MkdirAll(data, 0o700); err != nil {
			return res, err
		}
	}
	audit := filepath.Join(h.logs, "audit.log")
	_, offset, _ := countRequests(audit, 0, CozyUser) // skip what came before
	h.say("restart (%s): starting cozy-aio again", res.Name)
	if err := rep.start(h.exits); err != nil {
		return res, err
	}
	started := time.Now()
	want := h.expectedReleases()
	deadline := time.Now().Add(h.opts.Timeout)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case ex := <-h.exits:
			if ex.cmd == rep.cmd {
				return res, fmt.Errorf("cozy-aio exited after the restart (%v); its log: %s", ex.err, rep.log)
			}
			continue
		case <-time.After(restartPoll):
		}
		m := rep.scrape()
		if !m.up || m.runs < want {
			continue
		}
		units, err := h.listUnits(ctx)
		if err != nil || !h.settled(units) {
			continue
		}
		res.Confirmed, res.Runs = time.Since(started), m.runs
		break
	}
	if res.Confirmed == 0 {
		return res, fmt.Errorf("restart (%s): not every HelmRelease was confirmed within %s (%d Helm runs of %d)", res.Name, h.opts.Timeout, rep.last.runs, want)
	}
	time.Sleep(2 * time.Second)
	res.PeakRSS, res.CPU = procUsage(rep.cmd.Process.Pid)
	res.Requests, _, err = countRequests(audit, offset, CozyUser)
	if err != nil {
		return res, err
	}
	after, err := h.releaseRevisions(ctx)
	if err != nil {
		return res, err
	}
	res.Revisions = after - before
	h.say("restart (%s): every HelmRelease confirmed %.1fs after the start; %d API requests (%.2f per release); %d new revisions; %d ConfigMap writes",
		res.Name, res.Confirmed.Seconds(), res.Requests.Total(), float64(res.Requests.Total())/float64(want), res.Revisions, res.Requests.Writes("configmaps"))
	return res, nil
}

// idle watches cozy-aio for Options.Idle with nothing changing, touching
// neither it nor the API server, after a quiet period for what the run
// left in flight.
func (h *harness) idle(ctx context.Context) error {
	rep := h.reps[0]
	h.say("idle: waiting 10s, then measuring %s with nothing changing", h.opts.Idle)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
	}
	audit := filepath.Join(h.logs, "audit.log")
	_, offset, _ := countRequests(audit, 0, CozyUser)
	_, cpu0 := procUsage(rep.cmd.Process.Pid)
	api0, etcd0 := h.controlPlaneCPU()
	start := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(h.opts.Idle):
	}
	_, cpu1 := procUsage(rep.cmd.Process.Pid)
	api1, etcd1 := h.controlPlaneCPU()
	c := &IdleCost{Duration: time.Since(start), CPU: cpu1 - cpu0, APIServer: api1 - api0, Etcd: etcd1 - etcd0, RSS: procRSS(rep.cmd.Process.Pid)}
	var err error
	if c.Requests, _, err = countRequests(audit, offset, CozyUser); err != nil {
		return err
	}
	h.res.Idle = c
	h.say("idle: cozy-aio %.2f CPU-s per minute, %d API requests in %s, RSS %.1f MB at the end", c.PerMinute(c.CPU).Seconds(), c.Requests.Total(),
		c.Duration.Round(time.Second), float64(c.RSS)/(1<<20))
	return nil
}

// controlPlaneCPU is the CPU time so far of the kube-apiserver and etcd
// the harness started (its child processes of those names).
func (h *harness) controlPlaneCPU() (api, etcd time.Duration) {
	for name, pid := range ChildProcesses() {
		_, cpu := procUsage(pid)
		switch name {
		case "kube-apiserver":
			api += cpu
		case "etcd":
			etcd += cpu
		}
	}
	return api, etcd
}

// ChildProcesses maps the command names of this process's running
// children (zombies left out) to their pids.
func ChildProcesses() map[string]int {
	out := map[string]int{}
	ents, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) > 1 && f[0] != "Z" && f[1] == self {
			out[s[open+1:end]] = pid
		}
	}
	return out
}

// profile takes a CPU profile of cozy-aio (served with --profiling on its
// health address) of length d, as soon as the address answers, into
// logs/cozy-aio.cpu.pprof. `go tool pprof -top bin/cozy-aio
// logs/cozy-aio.cpu.pprof` reads it.
func (h *harness) profile(addr string, d time.Duration) {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds()))
	c := &http.Client{Timeout: d + 30*time.Second}
	for range 100 {
		resp, err := c.Get(url)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			h.say("profile: %s answered %s", url, resp.Status)
			return
		}
		f, err := os.Create(filepath.Join(h.logs, "cozy-aio.cpu.pprof"))
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
		return
	}
}
