package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/bootstrap"
	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/engine/cluster"
	"github.com/cozystack/cozy-aio/internal/egress"
	"github.com/cozystack/cozy-aio/internal/residency"
	"github.com/cozystack/cozy-aio/source/generate"
	"github.com/cozystack/cozy-aio/source/helmrepo"
)

// version is stamped at link time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	preferListWatch()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// preferListWatch turns client-go's streamed watch-list off unless the
// environment chooses (KUBE_FEATURE_WatchListClient). For a kind the API
// server has seen no write for since it started, which is every Flux kind
// but the used ones right after cozy-aio installs the CRDs, the stream's
// end-of-initial-events bookmark comes about a second late, and the
// engine starts no controller before every informer has synced; a plain
// LIST answers at once (measured: 1.1 s against 0.1 s for an empty kind).
func preferListWatch() {
	if _, ok := os.LookupEnv("KUBE_FEATURE_WatchListClient"); !ok {
		_ = os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	if cmd == "plan" {
		// Its exit code says what the plan holds.
		return planCmd(args, stdout, stderr)
	}
	var err error
	switch cmd {
	case "run":
		err = runEngine(args, stderr)
	case "static-pod":
		err = staticPod(args, stdout, stderr)
	case "status":
		err = statusCmd(args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, version)
	default:
		err = fmt.Errorf("unknown command %q: want run, status, plan, static-pod or version", cmd)
	}
	if err != nil {
		fmt.Fprintln(stderr, "cozy-aio:", err)
		return 1
	}
	return 0
}

// envDefault lets COZY_AIO_<FLAG> override a flag's default, so that a
// static pod can be configured through its environment.
func envDefault(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		key := "COZY_AIO_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(key); ok && err == nil {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %w", key, v, e)
			}
		}
	})
	return err
}

type runFlags struct {
	opts                   bootstrap.RunOptions
	shards, logFmt, logLvl string
	qps                    float64
	// watchConfigs is --watch-configs-label-selector.
	watchConfigs string
	// kinds is --kinds.
	kinds string
	// gcPercent is --gc-percent; gcPercentGiven tells whether the command
	// line or COZY_AIO_GC_PERCENT gave it.
	gcPercent      int
	gcPercentGiven bool
	// releaseInit is --release-init-pages.
	releaseInit bool
	// featureGates, destAllow and destDeny are --feature-gates,
	// --destination-allow and --destination-deny.
	featureGates, destAllow, destDeny string
}

// defaultGCPercent is --gc-percent's default: half of Go's own
// (GOGC=100). In make bench-scale (1,000 HelmReleases) it held 25 MB less
// anonymous memory (49.5 MB against 75.0 MB) for 10 % more CPU in
// cozy-aio (12.7 s against 11.5 s) and the same time to all Ready, the API
// server being the limit; another pair of runs: 21 MB for 20 % more CPU
// (docs/benchmarks/scale.md, session 8).
const defaultGCPercent = 50

func parseRun(args []string, stderr io.Writer) (*runFlags, error) {
	f := &runFlags{}
	o := &f.opts
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Discover.Server, "server", "", "API server URL; skips discovery")
	fs.StringVar(&o.Discover.Kubeconfig, "kubeconfig", "", "kubeconfig for credentials (default /etc/kubernetes/admin.conf if present, else the service account)")
	fs.StringVar(&o.Discover.KubePrismAddress, "kubeprism-address", "localhost:7445", "KubePrism address to try")
	fs.StringVar(&o.BootstrapDir, "bootstrap-dir", "", "directory of YAML objects to apply at start")
	fs.BoolVar(&o.PruneBootstrap, "prune-bootstrap", false, "delete objects whose files left the bootstrap directory")
	fs.IntVar(&o.Network.MinNodes, "network-min-nodes", 1, "nodes that must have a network before non-network units run")
	networkPhase := fs.Bool("network-phase", true, "reconcile network units first and hold the others until nodes have a network")
	fs.StringVar(&o.Engine.DataDir, "data-dir", "/var/lib/cozy-aio", "artifact store and state")
	fs.StringVar(&o.Engine.HealthAddr, "health-addr", "127.0.0.1:9440", "address of /healthz, /readyz and /metrics")
	fs.StringVar(&o.Engine.StatusPage.Addr, "status-addr", "127.0.0.1:9441", "address of the status page (docs/status-page.md); off the loopback it asks for a Kubernetes bearer token; empty: off")
	fs.StringVar(&o.Engine.StatusPage.Prefix, "status-prefix", "", "path the status page is served under, behind a reverse proxy (\"/cozy-aio\")")
	fs.StringVar(&o.Engine.WebhookAddr, "webhook-addr", "", "address of the Receiver webhook server, /hook/<digest> (default: off; it listens on the host's network)")
	fs.DurationVar(&o.Engine.Notify.RateLimit, "notification-rate-limit", 5*time.Minute, "send the same event for the same object to Alerts once per this interval")
	fs.StringVar(&o.Engine.ArtifactAddr, "artifact-addr", "127.0.0.1:9090", "address of the artifact server (loopback unless told otherwise)")
	fs.StringVar(&o.Engine.ArtifactBaseURL, "artifact-base-url", "", "URL prefix written in status.artifact.url, as Flux's --storage-adv-addr: an address that outlives this process, such as a Service in front of the replicas, each of which then serves any artifact (default: http://<artifact-addr>)")
	// Four shards of four workers: 16 Helm actions at once is what one API
	// server takes (docs/benchmarks/scale.md: make bench-defaults). "auto"
	// grows the count with the releases (ceil(releases/100) shards, so 40
	// workers at 1,000 and 256 at 10,000) and starts at one shard while
	// the releases are first weighed.
	fs.StringVar(&f.shards, "shards", "4", "Helm shards: a number, or auto (one per 100 HelmReleases, up to 64)")
	fs.IntVar(&o.Engine.ShardWorkers, "shard-workers", 4, "Helm workers per shard")
	fs.IntVar(&o.Engine.Concurrency, "concurrency", 4, "workers per source and Kustomization reconciler")
	fs.Float64Var(&f.qps, "kube-api-qps", 500, "client-side limit of API requests per second")
	fs.IntVar(&o.Engine.KubeAPIBurst, "kube-api-burst", 1000, "client-side burst of API requests")
	fs.StringVar(&o.Engine.UpgradeHold, "upgrade-hold", "never", "hold policy of a HelmRelease without the cozy-aio.cozystack.io/upgrade-hold annotation: never, risky or always (see docs/upgrade-preview.md)")
	fs.BoolVar(&o.Engine.DisableUpgradePlans, "disable-upgrade-plans", false, "make no plan of HelmRelease installs and upgrades (and hold none)")
	fs.StringVar(&o.Engine.TenantLabel, "tenant-label", "", "label naming a HelmRelease's tenant (default: its namespace)")
	fs.BoolVar(&o.Engine.Restricted, "restricted", false, "no cross-namespace references, no remote bases, default service account for tenants")
	fs.StringVar(&o.Engine.DefaultServiceAccount, "default-service-account", "default", "service account for tenants in restricted mode")
	fs.BoolVar(&o.Engine.AllowRemoteBases, "allow-remote-bases", false, "let kustomizations use remote bases")
	fs.BoolVar(&o.Engine.RemoteClusters.AllowExec, "insecure-kubeconfig-exec", false, "let the kubeconfigs of spec.kubeConfig run exec plugins (as Flux's flag of the same name)")
	fs.BoolVar(&o.Engine.RemoteClusters.AllowInsecureTLS, "insecure-kubeconfig-tls", false, "let the kubeconfigs of spec.kubeConfig skip TLS verification (as Flux's flag of the same name)")
	fs.StringVar(&f.featureGates, "feature-gates", "", "Flux's feature gates that cozy-aio knows, comma-separated Name=true|false: "+
		"ObjectLevelWorkloadIdentity (default false: a generic-provider kubeConfig ConfigMap stalls instead of having cozy-aio mint a token of its namespace's ServiceAccount and send it to the address the ConfigMap names), "+
		"StrictPostBuildSubstitutions (the same as --strict-substitutions)")
	fs.StringVar(&f.destAllow, "destination-allow", "", "CIDR ranges or addresses tenant-chosen addresses may reach although the destination policy refuses them by default, comma-separated (default none: remote clusters, generic providers, notification Providers and foreign artifacts may not reach link-local, unspecified or loopback addresses; sources may not reach link-local or unspecified ones)")
	fs.StringVar(&f.destDeny, "destination-deny", "", "CIDR ranges or addresses no tenant-chosen address may reach, comma-separated, whatever --destination-allow says (default none)")
	fs.Int64Var(&o.Engine.MaxReleaseRecordBytes, "max-release-record-bytes", helm.DefaultMaxReleaseRecordBytes, "largest Helm release record (a Secret anyone who may write Secrets in a storage namespace can write) once decompressed; a release whose record inflates past it ends Ready=False naming the Secret")
	fs.Int64Var(&o.Engine.GeneratorMemoryBytes, "generator-memory-bytes", generate.DefaultMemoryBytes, "memory all ArtifactGenerator builds share at once; an output that does not fit is composed in a temporary directory instead, as source-watcher does (negative: every output on disk)")
	fs.Int64Var(&o.Engine.HelmIndexMaxSize, "helm-index-max-size", helmrepo.DefaultMaxIndexSize, "largest Helm repository index fetched, in bytes (as Flux's flag of the same name)")
	fs.Int64Var(&o.Engine.HelmChartMaxSize, "helm-chart-max-size", helmrepo.DefaultMaxChartSize, "largest Helm chart archive fetched, in bytes (as Flux's flag of the same name)")
	fs.StringVar(&f.kinds, "kinds", "", "reconcile only these kinds, comma-separated Flux kind names (default: all); ArtifactGenerator alone runs cozy-aio beside Flux's controllers as their source-watcher")
	fs.StringVar(&f.watchConfigs, "watch-configs-label-selector", engine.DefaultWatchConfigsSelector, "ConfigMaps and Secrets whose changes reconcile the HelmReleases and Kustomizations that read them at once, as Flux's flag (empty: all; -: none)")
	fs.BoolVar(&o.Engine.StrictSubstitutions, "strict-substitutions", false, "fail a Kustomization whose postBuild ${var} has no value and no default, as Flux's StrictPostBuildSubstitutions feature gate")
	fs.BoolVar(&o.Engine.Profiling, "profiling", false, "serve Go pprof profiles under /debug/pprof/ on --health-addr")
	fs.StringVar(&o.Engine.HolderID, "replica-id", defaultReplicaID(), "this replica's identity, in its Leases and on the Helm releases it writes (default: $NODE_NAME, else the host name)")
	fs.StringVar(&o.Engine.HolderID, "holder-id", defaultReplicaID(), "the same as --replica-id (kept for old manifests)")
	r := &o.Engine.Replicas
	fs.BoolVar(&r.Enabled, "leader-elect", true, "share the cluster with other replicas: elect a leader and own Helm shards through Leases (false: this process does everything)")
	fs.StringVar(&r.Namespace, "leader-elect-namespace", "", "namespace of the Leases (default: $POD_NAMESPACE, else the service account's, else kube-system)")
	fs.StringVar(&r.LeaderLease, "leader-elect-lease", "cozy-aio-leader", "name of the leader's Lease")
	fs.DurationVar(&r.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a Lease that is not renewed stays held")
	fs.DurationVar(&r.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long a holder retries renewing before it gives up and stops writing")
	fs.DurationVar(&r.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "interval between attempts to acquire or renew a Lease")
	fs.DurationVar(&r.HandoffGrace, "handoff-grace", 30*time.Second, "longest wait for a shard's running Helm actions before its Lease is handed off; those still running are then cancelled")
	fs.DurationVar(&o.Engine.ProgressAfter, "progress-after", 2*time.Second, "how long a Helm action runs, or a HelmRelease waits in its shard's queue, before its status says so (negative: never)")
	fs.IntVar(&f.gcPercent, "gc-percent", defaultGCPercent, "Go's garbage collection target, as GOGC: the heap grows this percent above the live heap before a collection; lower holds less memory for more CPU (default: $GOGC if set, else this)")
	fs.BoolVar(&f.releaseInit, "release-init-pages", true, "give the kernel back the pages of the executable that only start-up touched (madvise MADV_PAGEOUT, Linux 5.4+), after the package initialisers, once the caches have synced and a few times after, and read its pages only as touched (MADV_RANDOM): 40 MB less resident memory")
	fs.StringVar(&f.logFmt, "log-format", "json", "json or text")
	fs.StringVar(&f.logLvl, "log-level", "info", "debug, info or error")
	if err := envDefault(fs); err != nil {
		return nil, err
	}
	_, f.gcPercentGiven = os.LookupEnv("COZY_AIO_GC_PERCENT")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	fs.Visit(func(fl *flag.Flag) { f.gcPercentGiven = f.gcPercentGiven || fl.Name == "gc-percent" })
	if f.gcPercent < 1 {
		return nil, fmt.Errorf("--gc-percent %d: want a positive number (GOGC=off turns collection off)", f.gcPercent)
	}
	o.SkipNetworkPhase = !*networkPhase
	if err := f.parseTenantBoundary(); err != nil {
		return nil, err
	}
	o.Engine.KubeAPIQPS = float32(f.qps)
	o.Engine.WatchConfigsSelector = f.watchConfigs
	for _, k := range strings.Split(f.kinds, ",") {
		if k = strings.TrimSpace(k); k != "" {
			o.Engine.Kinds = append(o.Engine.Kinds, k)
		}
	}
	if f.watchConfigs == "" {
		o.Engine.WatchConfigsSelector = engine.WatchAllConfigs // Flux: an empty selector selects all
	}
	if f.shards != "auto" {
		n, err := strconv.Atoi(f.shards)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--shards %q: want a positive number or auto", f.shards)
		}
		o.Engine.Shards = n
	}
	if o.Discover.Server != "" {
		o.Discover.Order = []string{bootstrap.CandidateExplicit}
	}
	return f, nil
}

// parseTenantBoundary reads --feature-gates, --destination-allow and
// --destination-deny into the engine's options. An unknown gate is an
// error: a gate cozy-aio does not implement must not look honoured.
func (f *runFlags) parseTenantBoundary() error {
	o := &f.opts.Engine
	for _, g := range strings.Split(f.featureGates, ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		name, val, ok := strings.Cut(g, "=")
		on, err := strconv.ParseBool(val)
		if !ok || err != nil {
			return fmt.Errorf("--feature-gates %q: want Name=true or Name=false", g)
		}
		switch name {
		case cluster.FeatureObjectLevelWorkloadIdentity:
			o.RemoteClusters.AllowWorkloadIdentity = on
		case "StrictPostBuildSubstitutions":
			o.StrictSubstitutions = o.StrictSubstitutions || on
		default:
			return fmt.Errorf("--feature-gates: cozy-aio does not know the gate %q (it knows %s and StrictPostBuildSubstitutions)",
				name, cluster.FeatureObjectLevelWorkloadIdentity)
		}
	}
	var err error
	if o.Destinations.Allow, err = egress.ParsePrefixes(f.destAllow); err != nil {
		return fmt.Errorf("--destination-allow: %w", err)
	}
	if o.Destinations.Deny, err = egress.ParsePrefixes(f.destDeny); err != nil {
		return fmt.Errorf("--destination-deny: %w", err)
	}
	return nil
}

// defaultReplicaID is the node name a static pod is given through its
// environment, else the host name (the node's, with the host network).
func defaultReplicaID() string {
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return h
}

// gcPercentToSet is the GC target the process runs with: --gc-percent when
// given, else $GOGC when set (the runtime read it already), else the
// flag's default. set is false when the runtime's setting stays.
func (f *runFlags) gcPercentToSet() (percent int, set bool) {
	if _, env := os.LookupEnv("GOGC"); env && !f.gcPercentGiven {
		return 0, false
	}
	return f.gcPercent, true
}

// settleSteps are the times after the caches have synced at which the
// executable's pages are given back again (--release-init-pages).
var settleSteps = []time.Duration{3 * time.Second, 30 * time.Second, 5 * time.Minute}

func runEngine(args []string, stderr io.Writer) error {
	f, err := parseRun(args, stderr)
	if err != nil {
		return err
	}
	if p, ok := f.gcPercentToSet(); ok {
		debug.SetGCPercent(p)
	}
	level := map[string]zapcore.Level{"debug": zapcore.DebugLevel, "info": zapcore.InfoLevel, "error": zapcore.ErrorLevel}[f.logLvl]
	logger := zap.New(zap.WriteTo(stderr), zap.UseDevMode(f.logFmt == "text"), zap.Level(level), zap.StacktraceLevel(zapcore.PanicLevel),
		func(o *zap.Options) { o.TimeEncoder = zapcore.ISO8601TimeEncoder })
	ctrl.SetLogger(logger)
	f.opts.Logger = logger.WithName("bootstrap")
	f.opts.Engine.Logger = logger
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger.Info("starting cozy-aio", "version", version)
	if f.releaseInit {
		// Before anything else (the initialisers have run, nothing of the
		// engine has yet); once the caches have synced (discovery, the
		// CRDs, the preflight checks, the first lists); and at each of
		// settleSteps after that, when the first source fetches, artifact
		// builds, chart loads and Helm actions of each kind have run
		// (one-time work may take seconds or minutes). Each release costs
		// reading the pages in use again. make bench-scale (1,000
		// releases): the binary's resident pages are 21-31 MB at the peak
		// with every step and random access, 38 MB without random access,
		// 44 MB with the first two steps alone, 50 MB with the first alone.
		release := func(when string) {
			if r, err := residency.ReleaseExecutable(); err != nil {
				logger.Info("could not release the executable's start-up pages", "when", when, "error", err.Error())
			} else {
				logger.V(1).Info("released the executable's start-up pages", "when", when, "advised", r.String())
			}
		}
		release("initialised")
		// From here on a page of the binary is read when touched, alone:
		// without the pages around it (readahead), which the kernel would
		// otherwise map too on a later touch nearby (fault-around). The
		// binary's resident pages are then what the process uses.
		if _, err := residency.ReadExecutableOnDemand(); err != nil {
			logger.Info("could not advise random access to the executable's pages", "error", err.Error())
		}
		f.opts.Started = func() {
			release("caches synced")
			for _, d := range settleSteps {
				time.AfterFunc(d, func() { release("caches synced " + d.String() + " ago") })
			}
		}
	}
	return bootstrap.Run(ctx, f.opts)
}

func staticPod(args []string, stdout, stderr io.Writer) error {
	var o bootstrap.StaticPodOptions
	fs := flag.NewFlagSet("static-pod", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Image, "image", "ghcr.io/cozystack/cozy-aio:"+imageTag(), "container image")
	fs.StringVar(&o.Kubeconfig, "kubeconfig-path", "", "host path of the kubeconfig (default /etc/kubernetes/cozy-aio.conf)")
	fs.StringVar(&o.BootstrapDir, "bootstrap-dir", "", "host path of the bootstrap directory (default /etc/cozy-aio/bootstrap)")
	fs.StringVar(&o.DataDir, "data-dir", "", "host path of the data directory (default /var/lib/cozy-aio)")
	fs.IntVar(&o.HealthPort, "health-port", 0, "port of /healthz, /readyz and /metrics (default 9440)")
	fs.IntVar(&o.ArtifactPort, "artifact-port", 0, "port of the artifact server (default 9090)")
	fs.StringVar(&o.MemoryLimit, "memory-limit", "", "memory limit; GOMEMLIMIT is 90% of it (default 1Gi)")
	if err := envDefault(fs); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := bootstrap.RenderStaticPod(o)
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}

func imageTag() string {
	if version == "dev" {
		return "latest"
	}
	return version
}
