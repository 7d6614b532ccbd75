package demo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Lease timings of a run with several replicas: shorter than cozy-aio's
// defaults (15s/10s/2s), so that the takeover after the leader is killed
// takes seconds rather than a quarter of a minute.
const (
	demoLeaseDuration = 5 * time.Second
	demoRenewDeadline = 3 * time.Second
	demoRetryPeriod   = time.Second
)

// replica is one cozy-aio process of the run, as the static pod of one
// control-plane node: its own replica ID, data directory, health and
// artifact addresses, all on loopback, and the bootstrap directory shared
// with the others.
type replica struct {
	id string
	// alone is the single process of a run without replicas: it keeps the
	// arguments, log and data directory the demo has always used.
	alone             bool
	health, artifacts string
	// page is the status page's address; empty when off.
	page   string
	args   []string
	log    string
	binary string
	// env is added to the process's environment.
	env []string
	// display, when set, is how messages name the process (a Flux
	// controller's).
	display string

	cmd  *exec.Cmd
	done chan struct{}
	// killed is when the harness killed the current incarnation; its exit
	// is then expected.
	killed time.Time
	starts int
	// last is the last scrape of the current incarnation; ended sums what
	// earlier incarnations reported last, with their resource usage.
	last      scraped
	endedRuns int
	endedReqs map[string]int
	endedCPU  time.Duration
	peakRSS   int64
}

// replicaExit is one incarnation of a replica ending.
type replicaExit struct {
	r   *replica
	cmd *exec.Cmd
	err error
}

// expected tells whether the harness killed this incarnation.
func (e replicaExit) expected() bool { return e.r.cmd == e.cmd && !e.r.killed.IsZero() }

// replicaOptions shape one replica's command line.
type replicaOptions struct {
	binary, workDir, logs, id string
	// alone keeps the demo's single-process arguments and file names.
	alone bool
	// server and kubeconfig reach the API server.
	server, kubeconfig string
	// health and artifacts are the loopback ports of /metrics and of the
	// artifact server (unused alone: it picks its own).
	health, artifacts int
	// page is the status page's loopback port; 0: off.
	page            int
	shards, workers int
	// extra are the flags of the shape (bootstrap or scale).
	extra []string
	// lease, renew and retry are the Lease duration, renew deadline and
	// retry period of several replicas. Defaults: demoLeaseDuration,
	// demoRenewDeadline and demoRetryPeriod.
	lease, renew, retry time.Duration
}

// newReplica lays out a replica's addresses, directories and arguments.
func newReplica(o replicaOptions) (*replica, error) {
	r := &replica{id: o.id, alone: o.alone, binary: o.binary, health: "127.0.0.1:" + strconv.Itoa(o.health)}
	data, logName := filepath.Join(o.workDir, "data"), "cozy-aio.log"
	idFlag := "--holder-id=" + o.id
	r.artifacts = "127.0.0.1:0"
	if !o.alone {
		r.artifacts = "127.0.0.1:" + strconv.Itoa(o.artifacts)
		data, logName = filepath.Join(o.workDir, "data", o.id), "cozy-aio-"+o.id+".log"
		idFlag = "--replica-id=" + o.id
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	r.log = filepath.Join(o.logs, logName)
	r.args = []string{"run",
		"--server=" + o.server, "--kubeconfig=" + o.kubeconfig,
		"--data-dir=" + data, "--health-addr=" + r.health, "--artifact-addr=" + r.artifacts,
		idFlag, "--log-format=json", "--profiling",
	}
	if o.page > 0 {
		r.page = "127.0.0.1:" + strconv.Itoa(o.page)
	}
	// Off unless asked for: processes started side by side would all
	// want the default port.
	r.args = append(r.args, "--status-addr="+r.page)
	// Zero leaves cozy-aio's own default (Options.EngineDefaults).
	if o.shards > 0 {
		r.args = append(r.args, "--shards="+strconv.Itoa(o.shards))
	}
	if o.workers > 0 {
		r.args = append(r.args, "--shard-workers="+strconv.Itoa(o.workers))
	}
	r.args = append(r.args, o.extra...)
	if !o.alone {
		or := func(d, def time.Duration) string {
			if d <= 0 {
				d = def
			}
			return d.String()
		}
		r.args = append(r.args,
			"--leader-elect-lease-duration="+or(o.lease, demoLeaseDuration),
			"--leader-elect-renew-deadline="+or(o.renew, demoRenewDeadline),
			"--leader-elect-retry-period="+or(o.retry, demoRetryPeriod))
	}
	return r, nil
}

// name is how messages name the replica.
func (r *replica) name() string {
	if r.display != "" {
		return r.display
	}
	if r.alone {
		return "cozy-aio"
	}
	return "cozy-aio " + r.id
}

// start runs a new incarnation (a restart appends to the replica's log); its end
// is sent on exits, which must have room for it.
func (r *replica) start(exits chan<- replicaExit) error {
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if r.starts > 0 {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	logf, err := os.OpenFile(r.log, flags, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.binary, r.args...)
	if len(r.env) > 0 {
		cmd.Env = append(os.Environ(), r.env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", r.binary, err)
	}
	done := make(chan struct{})
	r.cmd, r.done, r.killed, r.last = cmd, done, time.Time{}, scraped{}
	r.starts++
	go func() {
		err := cmd.Wait()
		logf.Close()
		close(done)
		exits <- replicaExit{r: r, cmd: cmd, err: err}
	}()
	return nil
}

// running tells whether the current incarnation runs.
func (r *replica) running() bool {
	return r.done != nil && !isClosed(r.done)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// kill ends the current incarnation with SIGKILL, as a node that dies,
// keeping what it reported and used.
func (r *replica) kill() time.Time {
	rss, cpu := procUsage(r.cmd.Process.Pid)
	r.killed = time.Now()
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.done
	r.peakRSS = max(r.peakRSS, rss)
	r.endedCPU += cpu
	r.endedRuns += r.last.runs
	if r.endedReqs == nil {
		r.endedReqs = map[string]int{}
	}
	for m, n := range r.last.requests {
		r.endedReqs[m] += n
	}
	return r.killed
}

// stop ends the current incarnation with SIGTERM, then SIGKILL after
// grace.
func (r *replica) stop(grace time.Duration) {
	if !r.running() {
		return
	}
	_ = syscall.Kill(r.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(grace):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
	}
}

// scrape reads the current incarnation's /metrics and keeps it as its
// last report.
func (r *replica) scrape() scraped {
	s := scrapeMetrics(r.health)
	if s.up {
		r.last = s
	}
	return s
}

// usage is the replica's peak RSS over its incarnations and their CPU
// time, read now.
func (r *replica) usage() (int64, time.Duration) {
	rss, cpu := r.peakRSS, r.endedCPU
	if r.running() {
		pr, pc := procUsage(r.cmd.Process.Pid)
		rss, cpu = max(rss, pr), cpu+pc
	}
	return rss, cpu
}

// work is the Helm runs that succeeded on the replica and its API requests
// by method, summed over its incarnations as last scraped.
func (r *replica) work() (int, map[string]int) {
	reqs := map[string]int{}
	for m, n := range r.endedReqs {
		reqs[m] += n
	}
	for m, n := range r.last.requests {
		reqs[m] += n
	}
	return r.endedRuns + r.last.runs, reqs
}

// ReplicaState is what one replica reported at a moment.
type ReplicaState struct {
	// Up is false when the replica was not running or did not answer.
	Up     bool
	Leader bool
	// Shards are the Helm shards it owned (cozy_aio_shard_owned 1).
	Shards []int
}

func (s ReplicaState) String() string {
	switch {
	case !s.Up:
		return "down"
	case s.Leader:
		return "leader, shards " + joinInts(s.Shards)
	}
	return "shards " + joinInts(s.Shards)
}

// joinInts writes shard IDs as "0,2", or "-" for none.
func joinInts(ids []int) string {
	if len(ids) == 0 {
		return "-"
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.Itoa(id)
	}
	return strings.Join(out, ",")
}

func stateOf(s scraped) ReplicaState {
	return ReplicaState{Up: s.up, Leader: s.leader, Shards: slices.Clone(s.owned)}
}
