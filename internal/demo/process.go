package demo

import (
	"os"
	"path/filepath"
	"time"
)

// ProcessOptions shape one cozy-aio process run as a node runs it, for
// harnesses outside this package (internal/chaos).
type ProcessOptions struct {
	// Binary is the cozy-aio binary; WorkDir holds its data directory
	// (WorkDir/data) and Logs its log (cozy-aio.log).
	Binary, WorkDir, Logs string
	// ID is its replica ID; Server and Kubeconfig reach the API server.
	ID, Server, Kubeconfig string
	// Health is the loopback port of /metrics.
	Health int
	// Shards and Workers are --shards and --shard-workers.
	Shards, Workers int
	// Extra are further flags.
	Extra []string
	// Env is added to the process's environment.
	Env []string
	// Replica runs it as one of several replicas of ID (--replica-id,
	// leader election, WorkDir/data/ID, cozy-aio-ID.log) instead of
	// alone.
	Replica bool
}

// Process is one cozy-aio process that can be started, killed with
// SIGKILL and started again with the same command line and data
// directory. It is not safe for concurrent use.
type Process struct {
	r     *replica
	exits chan replicaExit
	data  string
	// stopped is set by Stop until the next Start.
	stopped bool
}

// NewProcess lays out a process's directories and command line; Start
// runs it.
func NewProcess(o ProcessOptions) (*Process, error) {
	r, err := newReplica(replicaOptions{
		binary: o.Binary, workDir: o.WorkDir, logs: o.Logs, id: o.ID, alone: !o.Replica,
		server: o.Server, kubeconfig: o.Kubeconfig, health: o.Health,
		shards: o.Shards, workers: o.Workers, extra: o.Extra,
	})
	if err != nil {
		return nil, err
	}
	r.env = o.Env
	return &Process{r: r, exits: make(chan replicaExit, 1), data: filepath.Join(o.WorkDir, "data")}, nil
}

// Start runs a new incarnation; its log is appended to after the first.
func (p *Process) Start() error {
	// The previous incarnation's exit, if any, is not waited for.
	select {
	case <-p.exits:
	default:
	}
	p.stopped = false
	return p.r.start(p.exits)
}

// Kill ends the running incarnation with SIGKILL and returns when.
func (p *Process) Kill() time.Time { return p.r.kill() }

// Stop ends the running incarnation with SIGTERM, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	p.stopped = true
	p.r.stop(grace)
}

// Running tells whether an incarnation runs.
func (p *Process) Running() bool { return p.r.running() }

// Pid is the running incarnation's process ID, 0 when none runs.
func (p *Process) Pid() int {
	if !p.r.running() {
		return 0
	}
	return p.r.cmd.Process.Pid
}

// Starts counts the incarnations started.
func (p *Process) Starts() int { return p.r.starts }

// WipeData removes the data directory's contents (artifacts and state),
// as a node whose disk was replaced; call it while the process is down.
func (p *Process) WipeData() error {
	if err := os.RemoveAll(p.data); err != nil {
		return err
	}
	return os.MkdirAll(p.data, 0o700)
}

// Log is the path of its log, HealthAddr the address of its /metrics and
// Args its command line.
func (p *Process) Log() string        { return p.r.log }
func (p *Process) HealthAddr() string { return p.r.health }
func (p *Process) Args() []string     { return p.r.args }

// Usage is the peak RSS over its incarnations and their CPU time.
func (p *Process) Usage() (int64, time.Duration) { return p.r.usage() }

// Crashed tells whether the last incarnation ended by itself: not killed
// by Kill, not stopped by Stop.
func (p *Process) Crashed() bool {
	return p.r.done != nil && isClosed(p.r.done) && p.r.killed.IsZero() && !p.stopped
}
