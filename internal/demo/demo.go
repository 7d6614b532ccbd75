package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/status"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// Options configures Run. Binary is required.
type Options struct {
	// Tenants and Releases shape the platform: Tenants namespaces with
	// Releases HelmReleases each on average. Defaults: 20 and 5.
	Tenants, Releases int
	// Break gives one tenant a chart that does not render.
	Break bool
	// Nodes is the number of simulated nodes. Default: 3.
	Nodes int
	// Shards and ShardWorkers are passed to cozy-aio. Defaults: 4 and 4.
	Shards, ShardWorkers int
	// EngineDefaults runs cozy-aio without --shards and --shard-workers,
	// on its own defaults (Shards and ShardWorkers are then ignored).
	EngineDefaults bool
	// Binary is the cozy-aio binary to run.
	Binary string
	// WorkDir holds the bootstrap directory, cozy-aio's data and every
	// log. Default: a new temporary directory.
	WorkDir string
	// Out receives the progress and the summary. Default: discard.
	Out io.Writer
	// PageOff runs cozy-aio without its status page (--status-addr=).
	PageOff bool
	// PageBrowsers keeps that many headless Chromium browsers on the first
	// replica's status page through the run, and measures their first
	// view and how soon a status write shows (Result.Page).
	PageBrowsers int
	// Every is the progress interval. Default: 2s.
	Every time.Duration
	// Timeout bounds the wait for every unit to settle. Default: 10m.
	Timeout time.Duration
	// Scale runs the scale benchmark's shape instead: a plain API server
	// and etcd, no simulated nodes, and charts of three ConfigMaps.
	Scale bool
	// NetworkDelay is how long the simulated CNI takes from its agent pod
	// being Ready on a node to the node's network. Default: none.
	NetworkDelay time.Duration
	// Audit writes the API server's audit log (metadata of every request)
	// to logs/audit.log, to see which requests cozy-aio makes. The scale
	// shape always writes it: its summary breaks cozy-aio's requests down
	// by verb and resource from it.
	Audit bool
	// Restart, in the scale shape, stops cozy-aio once every unit is Ready
	// and starts it again on the same cluster, first with its data
	// directory, then with an empty one, and measures how long it takes to
	// confirm every release and what it asks the API server (Restart).
	Restart bool
	// Idle, in the scale shape, watches cozy-aio for that long at the end
	// with nothing changing and reports its CPU and API requests
	// (IdleCost). Default: 0, no idle measurement.
	Idle time.Duration
	// Profile, in the scale shape, takes a CPU profile of cozy-aio of that
	// length from its start (/debug/pprof/profile) into
	// logs/cozy-aio.cpu.pprof. Default: 0, none.
	Profile time.Duration
	// Replicas is the number of cozy-aio processes, run as the static pod
	// of that many control-plane nodes would run (replica IDs node-1 to
	// node-N, Leases in kube-system, shorter Leases than the defaults: see
	// demoLeaseDuration). With more than one, the harness kills the leader
	// with SIGKILL once a third of the tenant HelmReleases are Ready,
	// restarts it once the others have taken over (as kubelet restarts a
	// static pod), and checks that every release was installed exactly
	// once. Default: 1, a single process as before.
	Replicas int
	// KeepLeader, with several replicas, kills no one: for measuring what
	// the coordination costs (make bench-scale).
	KeepLeader bool
	// ChartSource, in the scale shape, is where the releases take their
	// chart from: "" (chartRef to an OCIRepository) or "helmrepository"
	// (spec.chart from an HTTP Helm repository with basic auth, one
	// HelmChart per release, as Flux does).
	ChartSource string
	// Clusters is the number of tenant clusters (Cozystack's managed
	// Kubernetes): each its own kube-apiserver and etcd, its admin
	// kubeconfig in a Secret. In the demo shape each gets ten addon
	// HelmReleases with spec.kubeConfig and a dependsOn chain from CRD
	// charts to their users; in the scale shape the i-th tenant's releases
	// deploy to the i-th cluster (the others stay local). Default: 0.
	Clusters int
	// ClustersUnused, in the scale shape, starts the tenant clusters but
	// keeps every release local: the machine carries the same API servers
	// as a remote run, for comparing the two at equal load.
	ClustersUnused bool
	// ClusterDown says what happens to the last tenant cluster: stopped
	// midway (the demo shape's default), down from the start, or kept up
	// (the scale shape's default).
	ClusterDown ClusterDown
	// Flux, in the scale shape, runs Flux's source-controller and
	// helm-controller in place of cozy-aio, for side-by-side figures (see
	// FluxControllers). Default: nil, cozy-aio.
	Flux *FluxControllers
}

func (o Options) withDefaults() Options {
	if o.Tenants <= 0 {
		o.Tenants = 20
	}
	if o.Releases <= 0 {
		o.Releases = 5
	}
	if o.Nodes <= 0 {
		o.Nodes = 3
	}
	switch {
	case o.EngineDefaults:
		o.Shards, o.ShardWorkers = 0, 0
	default:
		if o.Shards <= 0 {
			o.Shards = 4
		}
		if o.ShardWorkers <= 0 {
			o.ShardWorkers = 4
		}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Every <= 0 {
		// Each progress line reads cozy-aio's whole /metrics (1.5 MB at
		// 1,000 releases): less often with more releases.
		o.Every = max(2*time.Second, time.Duration(o.Tenants*o.Releases)*time.Millisecond)
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Clusters < 0 {
		o.Clusters = 0
	}
	if o.Scale {
		// One tenant cluster per tenant at most: tenant i's releases
		// deploy to the i-th.
		o.Clusters = min(o.Clusters, o.Tenants)
	}
	switch {
	case o.ClusterDown != "":
	case o.Scale:
		o.ClusterDown = ClusterDownNone
	default:
		o.ClusterDown = ClusterDownMidway
	}
	if o.Replicas > 1 || o.Scale {
		// The audit log shows which replica wrote each status, and what
		// cozy-aio asked by verb and resource.
		o.Audit = true
	}
	return o
}

// Result is what a run measured.
type Result struct {
	Tenants []Tenant
	// Units are every Flux object at the end.
	Units []Unit
	// Failed are the units that did not become Ready, but for Expected:
	// the stopped tenant cluster's addons that ended Ready=False as they
	// should.
	Failed, Expected []Unit
	// Clusters report each tenant cluster of Options.Clusters.
	Clusters []ClusterReport
	// Shards are the shard loads cozy-aio reported last.
	Shards []ShardLoad
	// Started is when Run began; CozyStarted when cozy-aio was started;
	// ClusterUp when the cluster answered; NetworkPodsRunning when the
	// last network agent pod became Ready; NetworkReady when the last node
	// got its network; FirstInstall when the first tenant release was
	// stored; AllSettled when every unit was Ready or failed.
	Started, ClusterUp, CozyStarted, NetworkPodsRunning, NetworkReady, FirstInstall, AllSettled time.Time
	// UpReady is when every unit but a stopped tenant cluster's was first
	// Ready, to the settle check's tenth of a second.
	UpReady time.Time
	// PeakRSS is cozy-aio's peak resident memory in bytes and CPU its
	// user+system CPU time, both read when every unit had settled. With
	// several replicas, PeakRSS is the largest replica's and CPU the sum
	// over every replica and incarnation.
	PeakRSS int64
	CPU     time.Duration
	// Memory splits the scale shape's peak RSS into anonymous and
	// file-backed memory (one replica only; nil otherwise).
	Memory *MemoryUse
	// Requests are cozy-aio's API requests by HTTP method at that moment
	// (summed over the replicas, as each last reported them).
	Requests map[string]int
	// RemoteRequests are cozy-aio's requests to the tenant clusters' API
	// servers at that moment (cozy_aio_remote_cluster_requests_total).
	RemoteRequests int
	// RemoteBreakdown are those requests by verb and resource, from the
	// tenant API servers' audit logs (with Options.Audit).
	RemoteBreakdown Requests
	// Breakdown is cozy-aio's API requests by verb and resource from the
	// API server's audit log, counted at the same moment as Requests (the
	// audit log is always written in the scale shape).
	Breakdown Requests
	// APIServerCPU and EtcdCPU are the CPU time of the API server and etcd
	// from cozy-aio's start to every unit settled (scale shape).
	APIServerCPU, EtcdCPU time.Duration
	// Restarts are the restarts of Options.Restart; Idle the idle cost of
	// Options.Idle.
	Restarts []Restart
	Idle     *IdleCost
	// MachineSpeed is JSON round trips per second over every CPU (see
	// machineSpeed), measured before the scale shape starts; 0 in the demo
	// shape.
	MachineSpeed float64
	// Checks are the properties verified at the end; a failed one is an
	// error.
	Checks []Check
	// Replicas report each cozy-aio process of a run with several, in the
	// order of their IDs; nil with one.
	Replicas []ReplicaReport
	// Failover is the leader's kill and the takeover of a run with several
	// replicas; nil with one.
	Failover *Failover
	// WorkDir holds the logs.
	WorkDir string
	// Page is what the demo saw of the status page; nil when off.
	Page *PageFigures
}

// Check is one verified property of a run.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

// ShardLoad is one shard as cozy-aio's metrics report it.
type ShardLoad = status.Shard

// Run runs the demo: it starts the sources and the simulated cluster (or,
// with Scale, a plain API server), runs cozy-aio as a node would, prints
// progress until every unit is Ready or has failed, verifies the run, and
// tears everything down. It returns an error naming every unit that failed
// and every check that did not hold.
func Run(ctx context.Context, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	if opts.Binary == "" {
		return nil, errors.New("demo: no cozy-aio binary given")
	}
	switch opts.ClusterDown {
	case ClusterDownMidway, ClusterDownStart, ClusterDownNone:
	default:
		return nil, fmt.Errorf("demo: cluster-down %q is not %q, %q or %q", opts.ClusterDown, ClusterDownMidway, ClusterDownStart, ClusterDownNone)
	}
	if fi, err := os.Stat(opts.Binary); err != nil || fi.IsDir() {
		return nil, fmt.Errorf("demo: the cozy-aio binary %s is missing (make build writes bin/cozy-aio)", opts.Binary)
	}
	var speed float64
	if opts.Scale {
		speed = machineSpeed(time.Second)
	}
	res := &Result{Started: time.Now(), Tenants: Tenants(opts.Tenants, opts.Releases, opts.Break), MachineSpeed: speed}
	if opts.WorkDir == "" {
		d, err := os.MkdirTemp("", "cozy-aio-demo-")
		if err != nil {
			return nil, err
		}
		opts.WorkDir = d
	}
	res.WorkDir = opts.WorkDir
	h := &harness{opts: opts, res: res, say: func(format string, args ...any) {
		fmt.Fprintf(opts.Out, "[%6.1fs] %s\n", time.Since(res.Started).Seconds(), fmt.Sprintf(format, args...))
	}}
	defer h.teardown()
	if err := h.setup(ctx); err != nil {
		return res, err
	}
	h.startPage(ctx)
	if err := h.watch(ctx); err != nil {
		return res, err
	}
	h.verify(ctx)
	if opts.Scale && len(h.reps) == 1 {
		if opts.Restart {
			if err := h.restarts(ctx); err != nil {
				h.check("restart", false, "%v", err)
			}
		}
		if opts.Idle > 0 {
			if err := h.idle(ctx); err != nil {
				h.check("idle", false, "%v", err)
			}
		}
	}
	h.summary()
	return res, h.verdict()
}

type harness struct {
	opts Options
	res  *Result
	say  func(format string, args ...any)

	git      *testenv.GitServer
	reg      *testenv.Registry
	helmRepo *testenv.HelmRepo
	cluster  *testenv.Cluster
	cp       *testenv.ControlPlane
	c        client.Client
	// units reads the Flux objects from watches, so that the progress
	// display costs the API server one event per change rather than a
	// full list of every object every interval.
	units     cache.Cache
	stopUnits context.CancelFunc
	// reps are the cozy-aio processes, one unless Options.Replicas says
	// more; exits receives the end of each of their incarnations.
	reps  []*replica
	exits chan replicaExit
	logs  string
	// apiCPU and etcdCPU are the control plane's CPU time when cozy-aio
	// started.
	apiCPU, etcdCPU time.Duration
	// mem samples the memory of the scale shape's single process until
	// every unit has settled (Result.Memory).
	mem *memorySampler
	// clusters are the tenant clusters of Options.Clusters.
	clusters []*tenantCluster
	// avail is when each Deployment of the simulated cluster was first
	// Available.
	avail *availability
	// page follows the status page; nil when off.
	page *pageClient
}

func (h *harness) setup(ctx context.Context) error {
	h.logs = filepath.Join(h.opts.WorkDir, "logs")
	if err := os.MkdirAll(h.logs, 0o755); err != nil {
		return err
	}
	secret := randomString()
	h.say("starting the OCI registry and the Git server (in this process, on loopback)")
	var err error
	if h.reg, err = testenv.StartRegistry(testenv.RegistryOptions{Username: "demo", Password: secret}); err != nil {
		return err
	}
	var kubeconfig string
	if h.opts.Scale {
		bin, err := installBinary(h.opts.Binary, filepath.Join(h.opts.WorkDir, "bin", "cozy-aio"))
		if err != nil {
			return fmt.Errorf("copying the cozy-aio binary: %w", err)
		}
		h.say("running a copy of %s read cold from disk, as on a node (%s): how much of the binary is resident depends on how its file sits in the page cache", h.opts.Binary, bin)
		h.opts.Binary = bin
		h.say("starting kube-apiserver and etcd (the scale shape needs no nodes)")
		if h.cp, err = testenv.StartControlPlane(testenv.ControlPlaneOptions{Scheme: engine.NewScheme(), LogDir: h.logs, StartTimeout: 2 * time.Minute, APIServerArgs: h.auditArgs()}); err != nil {
			return err
		}
		kc, err := h.cp.Kubeconfig("cozy-aio", "system:masters")
		if err != nil {
			return err
		}
		kubeconfig = filepath.Join(h.logs, "kubeconfig")
		if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
			return err
		}
		h.c = h.cp.Client
		if err := h.seedScale(ctx); err != nil {
			return err
		}
		var namespaces []string
		for _, t := range h.res.Tenants[:min(h.opts.Clusters, len(h.res.Tenants))] {
			namespaces = append(namespaces, t.Name)
		}
		if err := h.startClusters(ctx, namespaces); err != nil {
			return err
		}
	} else {
		if h.git, err = testenv.StartGitServer(testenv.GitOptions{Username: "demo", Password: secret}); err != nil {
			return err
		}
		repo, err := h.git.Repo("platform")
		if err != nil {
			return err
		}
		if _, err := repo.Commit("main", platformRepo(h.res.Tenants, h.opts.Clusters), "platform: tenants and their releases"); err != nil {
			return err
		}
		if _, err := h.reg.PushArtifact(ctx, "packages/charts", "v1", chartsArtifact(h.opts.Clusters > 0), nil); err != nil {
			return err
		}
		h.say("starting the simulated cluster: kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok; %d nodes without a network", h.opts.Nodes)
		h.cluster, err = testenv.StartCluster(ctx, testenv.ClusterOptions{
			Nodes: h.opts.Nodes, LogDir: h.logs, NetworkDelay: h.opts.NetworkDelay,
			ControlPlane: testenv.ControlPlaneOptions{Scheme: engine.NewScheme(), StartTimeout: 2 * time.Minute, APIServerArgs: h.auditArgs()},
		})
		if err != nil {
			return err
		}
		h.c = h.cluster.Client
		kubeconfig = h.cluster.Kubeconfig
		if err := h.startClusters(ctx, nil); err != nil {
			return err
		}
		boot := filepath.Join(h.opts.WorkDir, "bootstrap")
		if err := os.MkdirAll(boot, 0o755); err != nil {
			return err
		}
		objs := bootstrapObjects(h.res.Tenants, h.opts.Clusters > 0, repo.URL(), "demo", secret, "oci://"+h.reg.Host()+"/packages/charts", h.reg.DockerConfigJSON())
		if err := os.WriteFile(filepath.Join(boot, "platform.yaml"), []byte(objs), 0o644); err != nil {
			return err
		}
	}
	h.res.ClusterUp = time.Now()
	h.say("cluster up; logs in %s", h.logs)
	api := h.cp
	if h.cluster != nil {
		api = h.cluster.ControlPlane
	}
	if h.units, err = cache.New(api.Config, cache.Options{Scheme: engine.NewScheme()}); err != nil {
		return err
	}
	uctx, cancel := context.WithCancel(context.Background())
	h.stopUnits = cancel
	go func() { _ = h.units.Start(uctx) }()
	if h.cluster != nil {
		if h.avail, err = watchAvailability(ctx, h.units); err != nil {
			return err
		}
	}
	return h.startReplicas(api.Config.Host, kubeconfig)
}

// auditArgs are the API server flags of Options.Audit.
func (h *harness) auditArgs() map[string]string {
	if !h.opts.Audit {
		return nil
	}
	policy := filepath.Join(h.logs, "audit-policy.yaml")
	_ = os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"), 0o644)
	// No rotation: the counts read the one file (about 12 KB a release).
	return map[string]string{"audit-policy-file": policy, "audit-log-path": filepath.Join(h.logs, "audit.log"), "audit-log-maxsize": "0"}
}

// startReplicas runs cozy-aio as on a node: host network, a bootstrap
// directory, a data directory. With several replicas, each is a node's:
// its own ID, data directory and addresses, the same bootstrap directory.
func (h *harness) startReplicas(server, kubeconfig string) error {
	if h.opts.Flux != nil {
		return h.startFlux(kubeconfig)
	}
	var extra []string
	if h.opts.Scale {
		extra = append(extra, "--network-phase=false")
	} else {
		extra = append(extra, "--bootstrap-dir="+filepath.Join(h.opts.WorkDir, "bootstrap"),
			"--network-min-nodes="+strconv.Itoa(h.opts.Nodes))
	}
	if h.opts.Clusters > 0 {
		// The tenant clusters' API servers listen on this machine's
		// loopback, which cozy-aio refuses for remote clusters by default
		// (the destination policy): here they stand for remote machines.
		extra = append(extra, "--destination-allow=127.0.0.0/8")
	}
	n := h.opts.Replicas
	h.exits = make(chan replicaExit, 2*n+4) // every start, the restart, the scale shape's restarts
	// Every replica's health and artifact ports at once: a port chosen
	// after a replica started may be one it is about to bind.
	ports, err := freePorts(3 * n)
	if err != nil {
		return err
	}
	if n > 1 && !h.opts.KeepLeader {
		h.res.Failover = &Failover{}
		h.say("starting %d cozy-aio replicas, as the static pod of %d control-plane nodes; Leases %s/%s/%s (duration/renew deadline/retry)",
			n, n, demoLeaseDuration, demoRenewDeadline, demoRetryPeriod)
	}
	for i := 1; i <= n; i++ {
		o := replicaOptions{
			binary: h.opts.Binary, workDir: h.opts.WorkDir, logs: h.logs, id: "demo", alone: n == 1,
			server: server, kubeconfig: kubeconfig, shards: h.opts.Shards, workers: h.opts.ShardWorkers, extra: extra,
			health: ports[3*i-3], artifacts: ports[3*i-2],
		}
		if !h.opts.PageOff {
			o.page = ports[3*i-1]
		}
		if n > 1 {
			o.id = "node-" + strconv.Itoa(i)
			h.res.Replicas = append(h.res.Replicas, ReplicaReport{ID: o.id})
		}
		r, err := newReplica(o)
		if err != nil {
			return err
		}
		h.reps = append(h.reps, r)
		h.say("starting %s: %s %s", r.name(), filepath.Base(h.opts.Binary), strings.Join(r.args, " "))
		if err := r.start(h.exits); err != nil {
			return err
		}
	}
	h.res.CozyStarted = time.Now()
	h.apiCPU, h.etcdCPU = h.controlPlaneCPU()
	if h.opts.Scale && h.opts.Profile > 0 {
		go h.profile(h.reps[0].health, h.opts.Profile)
	}
	if h.opts.Scale && n == 1 {
		h.mem = startMemorySampler(h.reps[0].cmd.Process.Pid, h.reps[0].health, h.logs, h.opts.Profile > 0)
	}
	return nil
}

// expectedReleases is the number of HelmReleases the run ends with.
func (h *harness) expectedReleases() int {
	n := 0
	for _, t := range h.res.Tenants {
		n += t.Releases
	}
	if !h.opts.Scale {
		n++ // the network release
	}
	return n + h.clusterReleases()
}

// settleCheck is how often watch looks for every unit having settled, so
// that the time to all Ready is measured to a tenth of a second rather
// than to the progress interval; each look reads every unit, so with more
// than 1,000 releases it looks a tenth of a second less often per 1,000.
func (h *harness) settleCheck() time.Duration {
	return 100 * time.Millisecond * time.Duration(max(1, h.expectedReleases()/1000))
}

// watch prints progress every interval until every unit has settled and
// stays so at the next progress line.
func (h *harness) watch(ctx context.Context) error {
	deadline := time.After(h.opts.Timeout)
	tick := time.NewTicker(h.opts.Every)
	defer tick.Stop()
	check := time.NewTicker(h.settleCheck())
	defer check.Stop()
	for {
		printing := false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ex := <-h.exits:
			if ex.expected() {
				continue
			}
			return fmt.Errorf("%s exited early (%v); its log: %s", ex.r.name(), ex.err, ex.r.log)
		case <-deadline:
			units, _ := listUnits(ctx, h.units)
			h.res.Units = units
			var waiting []string
			for _, u := range units {
				if !u.Settled {
					waiting = append(waiting, fmt.Sprintf("%s (%s: %s)", u, u.Reason, u.Message))
				}
			}
			if f := h.res.Failover; f != nil && f.Restarted.IsZero() {
				waiting = append([]string{"the leader's kill and the takeover (" + f.String() + ")"}, waiting...)
			}
			if len(waiting) > 10 {
				waiting = append(waiting[:10], fmt.Sprintf("and %d more", len(waiting)-10))
			}
			return fmt.Errorf("not settled after %s; still waiting: %s", h.opts.Timeout, strings.Join(waiting, "; "))
		case <-tick.C:
			printing = true
		case <-check.C:
		}
		units, err := h.listUnits(ctx)
		if err != nil {
			// Until cozy-aio has installed the CRDs and the watches have
			// synced, the progress line shows the phase and shards alone.
			if printing {
				h.progress(ctx, nil)
			}
			continue
		}
		h.res.Units = units
		if h.res.Failover != nil {
			h.failover(units)
		}
		h.clusterStep(ctx, units)
		if h.res.UpReady.IsZero() && h.upReady(units) {
			h.res.UpReady = time.Now()
		}
		settled, before := h.settled(units), !h.res.AllSettled.IsZero()
		switch {
		case !settled:
			h.res.AllSettled = time.Time{}
		case !before:
			h.res.AllSettled = time.Now()
			h.pageTrials(ctx)
			h.usage()
		}
		if !printing {
			continue
		}
		h.progress(ctx, units)
		if settled && before {
			return nil
		}
	}
}

// listUnits reads every unit from the watches, giving up soon on a kind
// whose CRD is not installed or whose watch has not synced yet (cozy-aio
// installs the CRDs when it starts), so that progress keeps printing.
func (h *harness) listUnits(ctx context.Context) ([]Unit, error) {
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	return listUnits(ctx, h.units, client.UnsafeDisableDeepCopy)
}

func (h *harness) settled(units []Unit) bool {
	if f := h.res.Failover; f != nil && f.Restarted.IsZero() {
		return false // the takeover is part of the run
	}
	releases := 0
	for _, u := range units {
		if c := h.stoppedCluster(u); c != nil {
			if !downAsExpected(u, c) {
				return false
			}
		} else if !u.Settled {
			return false
		}
		if u.Kind == "HelmRelease" {
			releases++
		}
	}
	return releases == h.expectedReleases()
}

// upReady is true when every HelmRelease is there and every unit but a
// stopped tenant cluster's is Ready.
func (h *harness) upReady(units []Unit) bool {
	releases := 0
	for _, u := range units {
		if u.Kind == "HelmRelease" {
			releases++
		}
		if !u.Ready && h.stoppedCluster(u) == nil {
			return false
		}
	}
	return releases == h.expectedReleases()
}

func (h *harness) progress(ctx context.Context, units []Unit) {
	var b strings.Builder
	m, states := h.scrape()
	if m.phase != "" {
		fmt.Fprintf(&b, "phase=%-7s ", m.phase)
	}
	b.WriteString(status.ReadyLine(countUnits(units)))
	if h.cluster != nil {
		ready, total := h.nodesWithNetwork(ctx)
		fmt.Fprintf(&b, "  nodes-with-network %d/%d", ready, total)
	}
	if len(m.shards) > 0 {
		h.res.Shards = m.shards
		b.WriteString("  shard-load")
		for _, s := range m.shards {
			fmt.Fprintf(&b, " %d:%d", s.ID, s.Load)
		}
	}
	if len(h.reps) > 1 {
		b.WriteString("  replicas")
		for i, r := range h.reps {
			fmt.Fprintf(&b, " %s[%s]", r.id, states[i].short())
		}
	}
	h.say("%s", b.String())
}

// scraped is what the demo reads from a cozy-aio process's /metrics
// (status.Scrape, which `cozy-aio status` reads too).
type scraped struct {
	// up is set when /metrics answered.
	up     bool
	phase  string
	shards []ShardLoad
	// requests are the API requests so far by HTTP method, from
	// client-go's rest_client_requests_total.
	requests map[string]int
	// leader is cozy_aio_leader; owned are the shards whose
	// cozy_aio_shard_owned is 1; runs sums
	// cozy_aio_tenant_runs_succeeded_total over the tenants; running
	// sums the Helm items running over the shards.
	leader        bool
	owned         []int
	runs, running int
	// remote are the remote clusters' metrics, by their Secret.
	remote map[string]*status.RemoteMetrics
}

// scrapeMetrics reads the /metrics of the cozy-aio process at addr once.
func scrapeMetrics(addr string) scraped {
	m, err := status.Scrape(context.Background(), addr)
	if err != nil {
		return scraped{}
	}
	return scraped{up: m.Up, phase: m.Phase, shards: m.Shards, requests: m.Requests,
		leader: m.Leader, owned: m.Owned(), runs: m.Runs, running: m.Running, remote: m.Remote}
}

func (h *harness) teardown() {
	if h.page != nil {
		h.page.close()
	}
	if h.mem != nil {
		h.mem.finish()
		h.mem = nil
	}
	if h.stopUnits != nil {
		h.stopUnits()
	}
	var wg sync.WaitGroup
	for _, r := range h.reps {
		wg.Go(func() { r.stop(20 * time.Second) })
	}
	wg.Wait()
	h.stopClusters()
	if h.cluster != nil {
		_ = h.cluster.Stop()
	}
	if h.cp != nil {
		_ = h.cp.Stop()
	}
	if h.git != nil {
		h.git.Close()
	}
	if h.reg != nil {
		h.reg.Close()
	}
	if h.helmRepo != nil {
		h.helmRepo.Close()
	}
}

// procRSS reads a process's resident memory now (VmRSS).
func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procUsage reads a process's peak RSS (VmHWM) and its CPU time.
func procUsage(pid int) (int64, time.Duration) {
	var rss int64
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				rss = kb << 10
			}
		}
	}
	var cpu time.Duration
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the command name, which ends with ')'.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 13 {
				ut, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ
			}
		}
	}
	return rss, cpu
}

// freePorts returns n distinct free loopback ports: each listener stays
// open until all are chosen, so that no two are the same.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomString() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
