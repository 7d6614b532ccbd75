package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cozystack/cozy-aio/internal/statuspage"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notifyv1 "github.com/fluxcd/notification-controller/api/v1"
	notifyv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/internal/artifacts"
	"github.com/cozystack/cozy-aio/engine/internal/controllers"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/generator"
	"github.com/cozystack/cozy-aio/engine/internal/helmrelease"
	"github.com/cozystack/cozy-aio/engine/internal/kinds"
	"github.com/cozystack/cozy-aio/engine/internal/kustomization"
	"github.com/cozystack/cozy-aio/engine/internal/notifications"
	"github.com/cozystack/cozy-aio/engine/internal/replicas"
	"github.com/cozystack/cozy-aio/engine/internal/sources"
	"github.com/cozystack/cozy-aio/engine/internal/targets"
	"github.com/cozystack/cozy-aio/shard"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/helmrepo"
)

// NewScheme returns a scheme with the Kubernetes built-in types and the
// Flux kinds the engine reconciles.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(AddToScheme(s))
	return s
}

// Engine reconciles the Flux kinds in one controller-runtime manager: one
// client, one informer cache, one metrics registry.
type Engine struct {
	opts     Options
	cfg      *rest.Config
	mgr      manager.Manager
	store    *source.Store
	server   *source.Server
	metrics  *frame.Metrics
	registry *prometheus.Registry
	// events is the event broadcaster of the engine's own manager (New),
	// which Start shuts down; nil on an embedder's manager.
	events   record.EventBroadcaster
	graph    *frame.Graph
	recorder recorder.EventRecorder
	// finisher writes each reconcile's outcome; admission admits units
	// over graph (both built at the end of setup).
	finisher  *frame.Finisher
	admission *frame.Admission
	// start is when this engine was built: the incarnation recorded on
	// the Helm releases it writes and on its replica Lease.
	start time.Time
	// ownManager is set by New: Start installs the CRDs and starts mgr.
	ownManager bool
	// replicas coordinates with other engines; nil when alone.
	replicas *replicas.Replicas

	appliers   targets.Appliers
	applyCache *apply.Cache
	// helmCache answers Helm's existence checks from watches.
	helmCache *helm.Cache
	waits     localWaiter
	pool      *shard.Pool
	// statusPage is the status page, nil when off.
	statusPage *statuspage.Server
	// helmMgr is the Helm manager of this cluster's releases.
	helmMgr localHelm
	// targets holds the clients of every cluster units deploy to: this
	// one, and the remote ones of spec.kubeConfig.
	targets *targets.Targets
	// artifacts resolves the artifacts units read and rebuilds those the
	// store lacks (engine/internal/artifacts).
	artifacts *artifacts.Artifacts
	// generator reconciles the ArtifactGenerators and rebuilds their
	// outputs (engine/internal/generator).
	generator *generator.Reconciler
	// helmrelease reconciles HelmReleases (engine/internal/helmrelease).
	helmrelease *helmrelease.Reconciler
	// kustomization applies Kustomizations
	// (engine/internal/kustomization).
	kustomization *kustomization.Reconciler
	// sources reconciles the source kinds and rebuilds their artifacts
	// (engine/internal/sources).
	sources *sources.Sources
	// notify sends events to Alerts and serves Receivers (notify.go).
	notify *notifications.Notifier
	// runCtx lives as long as the manager runs; waits started by
	// reconcilers use it.
	runCtx atomic.Pointer[context.Context]

	// registered are the families' registrations by kind (kinds.go).
	registered map[string]frame.Registration
	// controllers run the kinds' reconcilers and own their work queues
	// and wake-ups (engine/internal/controllers).
	controllers *controllers.Controllers
}

// New builds an Engine on cfg, with a manager of its own. Nothing runs
// until Start. With Options.Replicas enabled, the engine elects a leader
// through the Lease Replicas.LeaderLease.
func New(cfg *rest.Config, opts Options) (*Engine, error) {
	// Before anything is opened (the artifact server's listener).
	if err := controllers.CheckKinds(opts.Kinds, reconciledKinds()); err != nil {
		return nil, err
	}
	if _, err := frame.ParseHoldPolicy(opts.UpgradeHold); err != nil {
		return nil, fmt.Errorf("UpgradeHold: %w", err)
	}
	opts = opts.withDefaults()
	cfg = rest.CopyConfig(cfg)
	if opts.Replicas.Enabled {
		// The API server's audit log then tells which replica wrote what.
		if cfg.UserAgent == "" {
			cfg.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		cfg.UserAgent += " replica/" + opts.HolderID
	}
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = opts.KubeAPIQPS, opts.KubeAPIBurst
	}
	if cfg.WarningHandler == nil && cfg.WarningHandlerWithContext == nil {
		// Each distinct API warning once: the API server repeats the same
		// warning (for example about Flux's finalizer name) on every write.
		cfg.WarningHandlerWithContext = ctrllog.NewKubeAPIWarningLogger(ctrllog.KubeAPIWarningLoggerOptions{Deduplicate: true})
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = ctrllog.Log
	}
	opts.Logger = frame.CapVerbosity(opts.Logger)
	mopts := ctrl.Options{
		Scheme:                 NewScheme(),
		Logger:                 opts.Logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Secrets and ConfigMaps are read when referenced, not cached: a
		// cluster-wide informer would hold every Secret in memory and
		// receive every Helm release revision written (as Flux does).
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}},
		// The cached objects keep no managedFields: nothing the engine
		// reads from the cache looks at them (status patches are merge
		// patches computed between two copies of the cached object, and
		// server-side applies are built from scratch or go through the
		// appliers' own clients), and they are a large part of each
		// HelmRelease (one entry per writer, with the fields it owns).
		//
		// And the HelmReleases and HelmCharts share one copy of the
		// strings they have in common (engine/internal/kinds): 527 B less per
		// cached HelmRelease, 320 B per HelmChart.
		Cache: cache.Options{DefaultTransform: kinds.CacheTransform()},
		// core/v1 Events, as Flux records them, written in parallel
		// (events.go).
		EventBroadcaster: frame.NewEventBroadcaster(), //nolint:staticcheck
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	e, err := setup(mgr, cfg, opts, true)
	if err != nil {
		return nil, err
	}
	e.events = mopts.EventBroadcaster //nolint:staticcheck
	return e, nil
}

// Setup builds an Engine on a manager the embedder owns, sharing its
// client, cache and leader election: the source, ArtifactGenerator and
// Kustomization reconcilers run where mgr is the leader, and the
// HelmRelease reconciler on every instance (with Options.Replicas
// enabled, each instance runs only the Helm shards whose Lease it holds).
// The manager's scheme must hold the engine's types (AddToScheme). The
// embedder installs the CRDs (InstallCRDs) and starts mgr; Engine.Start
// is not used.
func Setup(mgr manager.Manager, opts Options) (*Engine, error) {
	return setup(mgr, mgr.GetConfig(), opts.withDefaults(), false)
}

// setup builds the engine on mgr; ownManager is set by New: Start then
// installs the CRDs and starts mgr, and with replicas the engine elects
// its leader itself.
func setup(mgr manager.Manager, cfg *rest.Config, opts Options, ownManager bool) (*Engine, error) {
	registry := opts.Registry
	if registry == nil {
		registry = ctrlmetrics.Registry.(*prometheus.Registry)
	}
	// The server asks the engine for an artifact its store lacks; the
	// engine exists once the store does.
	var eng atomic.Pointer[Engine]
	store, server, err := artifactStore(opts, func(ctx context.Context, p string) bool {
		if e := eng.Load(); e != nil {
			return e.artifacts.ServeMissing(ctx, p)
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	applyCache, err := apply.NewCache(cfg)
	if err != nil {
		return nil, err
	}
	helmCache, err := helm.NewCache(cfg)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		applyCache: applyCache, helmCache: helmCache, start: time.Now(), ownManager: ownManager,
		opts: opts, cfg: cfg, mgr: mgr, store: store, server: server,
		metrics: frame.NewMetrics(registry), registry: registry, graph: frame.NewGraph(),
		// core/v1 Events, as Flux records them (coreEvents).
		recorder: frame.CoreEvents{Recorder: mgr.GetEventRecorderFor("cozy-aio")}, //nolint:staticcheck
	}
	e.runCtx.Store(&contextBackground)
	e.controllers = controllers.New(controllers.Deps{Manager: mgr, Graph: e.graph, Metrics: e.metrics, Leading: e.leading},
		controllers.Options{Concurrency: opts.Concurrency, Kinds: opts.Kinds, WatchConfigsSelector: opts.WatchConfigsSelector})
	e.artifacts = artifacts.New(artifacts.Deps{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Store: store,
		Destinations: e.destinations(), Restricted: opts.Restricted, Reconciles: e.controllers.Reconciles,
		Elected: func() bool { return replicas.IsDone(e.elected()) }, Landing: e.mirrorLanding,
		RunContext: func() context.Context { return *e.runCtx.Load() }, Enqueue: e.controllers.Enqueue, Rebuild: e.rebuild})
	eng.Store(e)
	if e.targets, err = targets.New(targets.Options{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(),
		Local:  &targets.Clients{Cfg: cfg, Cache: applyCache, Helm: e.helmManager, Waiter: e.healthWaiter, Appliers: &e.appliers},
		Remote: opts.RemoteClusters, Destinations: e.destinations(), HelmOptions: e.managerOptions}); err != nil {
		return nil, err
	}
	// Alone, the engine places with memory: a tenant moves only when the
	// balance target needs it. Replicas place with the memory the leader
	// publishes (replicas_assignment.go), so that they agree.
	popts := shard.PoolOptions{Shards: opts.Shards, Workers: opts.ShardWorkers, Assign: shard.Options{Sticky: !opts.Replicas.Enabled}}
	if opts.Replicas.Enabled {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		e.replicas = replicas.New(replicas.Deps{Options: opts.Replicas, HolderID: opts.HolderID, Start: e.start,
			Clientset: cs, Logger: opts.Logger, Pool: func() *shard.Pool { return e.pool }, Shards: opts.Shards, Recorder: e.recorder, Elected: e.elected,
			WakeKinds: e.controllers.WakeKinds, WakeShard: e.wakeShard, WakeTenant: e.wakeTenant,
			ArtifactBaseURL: opts.ArtifactBaseURL, Keeper: replicas.ArtifactKeeper{Leading: e.leading, Stored: e.stored, Foreign: e.foreign, Materialize: e.materialize}, Client: mgr.GetClient(), Cache: mgr.GetCache(), Store: store})
		if ownManager {
			// The engine's own election, not the manager's: a replica that
			// loses the Lease becomes a standby instead of exiting, and a
			// takeover follows the Lease's expiry as this replica observed
			// it.
			e.replicas.Leader = e.replicas.NewLeaseLock(opts.Replicas.LeaderLease, map[string]string{replicas.LabelLeaseRole: replicas.RoleLeader})
		}
		popts.Owned = e.replicas.Owns
		popts.Moved = e.replicas.Moved
		// Every replica must derive the same shard count from the same
		// HelmReleases: no hysteresis, which depends on each one's history.
		popts.Auto.Hysteresis = -1
	}
	e.pool = shard.NewPool(popts)
	if err := registerClusters(registry, e.targets.Registry); err != nil {
		return nil, err
	}
	if err := replicas.RegisterPool(registry, e.pool, e.ownsShard, e.leading); err != nil {
		return nil, fmt.Errorf("registering the shard metrics: %w", err)
	}
	e.finisher = &frame.Finisher{Client: mgr.GetClient(), Logger: e.log, Metrics: e.metrics,
		MayWrite: e.mayWriteStatus, Rewritten: func(ref frame.Ref) bool { return e.helmrelease.StatusRewritten(ref) }}
	e.admission = &frame.Admission{Graph: e.graph, Gate: opts.Gate, Reader: mgr.GetClient(), NewObject: e.newObjectOf}
	if e.notify, e.recorder, err = notifications.Setup(notifications.Deps{
		Manager: mgr, Options: opts.Notify, WebhookAddr: opts.WebhookAddr, HolderID: opts.HolderID, Restricted: opts.Restricted,
		Registry: registry, Recorder: e.recorder, Finisher: e.finisher, Leading: e.leading, Secret: e.secret,
		Destinations: e.destinations(), NewObject: e.newObjectOf,
	}); err != nil {
		return nil, err
	}
	e.finisher.Recorder = e.recorder
	// The families, each with what it uses of the engine.
	e.helmrelease = helmrelease.New(helmrelease.Deps{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Store: store,
		Finisher: e.finisher, Admission: e.admission, Graph: e.graph, Recorder: e.recorder, Logger: e.log,
		Targets: e.targets, Pool: e.pool, OwnsTenant: e.ownsTenant, MayWrite: e.mayWriteStatus,
		SourceArtifact: e.sourceArtifact, ReadsConfigs: e.controllers.ReadsConfigs, Enqueue: e.controllers.Enqueue, ServiceAccount: e.serviceAccount},
		helmrelease.Options{Restricted: opts.Restricted, TenantLabel: opts.TenantLabel, ProgressAfter: opts.ProgressAfter, Logger: opts.Logger,
			UpgradeHold: frame.HoldPolicy(opts.UpgradeHold), DisablePlans: opts.DisableUpgradePlans})
	e.kustomization = kustomization.New(kustomization.Deps{Client: mgr.GetClient(), Store: store, Finisher: e.finisher,
		Admission: e.admission, Graph: e.graph, Recorder: e.recorder, Logger: e.log, Targets: e.targets,
		SourceArtifact: e.sourceArtifact, ReadsConfigs: e.controllers.ReadsConfigs, Enqueue: e.controllers.Enqueue,
		RunContext: func() context.Context { return *e.runCtx.Load() }, Managers: e.kustomizeManagers(),
		ServiceAccount: e.serviceAccount}, kustomization.Options{Restricted: opts.Restricted,
		AllowRemoteBases: opts.AllowRemoteBases, StrictSubstitutions: opts.StrictSubstitutions,
		UpgradeHold: frame.HoldPolicy(opts.UpgradeHold), DisablePlans: opts.DisableUpgradePlans})
	e.sources = sources.New(sources.Deps{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Store: store, Finisher: e.finisher,
		Graph: e.graph, Secret: e.secret, Dial: e.sourceDial(), Destinations: e.destinations(),
		HelmRepos: helmrepo.NewClient(helmrepo.ClientOptions{}), Stored: e.stored, SourceArtifact: e.sourceArtifact,
		Enqueue: e.controllers.Enqueue, Slot: e.artifacts.Slot}, sources.Options{HelmIndexMaxSize: opts.HelmIndexMaxSize, HelmChartMaxSize: opts.HelmChartMaxSize})
	e.generator = generator.New(generator.Deps{Client: mgr.GetClient(), Store: store, Finisher: e.finisher, Graph: e.graph,
		Recorder: e.recorder, SourceArtifact: e.sourceArtifact, Slot: e.artifacts.Slot}, generator.Options{DefaultInterval: opts.DefaultInterval,
		FieldManager: opts.FieldManager, Restricted: opts.Restricted, DefaultServiceAccount: opts.DefaultServiceAccount,
		MemoryBytes: opts.GeneratorMemoryBytes, PrivateExtraction: opts.privateExtraction})
	e.registered = e.registrations()
	ks, err := e.kinds()
	if err != nil {
		return nil, err
	}
	if err := e.controllers.Setup(ks, e.replicas != nil && e.replicas.Leader != nil); err != nil {
		return nil, err
	}
	runnables := []manager.Runnable{applyCache, helmCache, e.pool, server, manager.RunnableFunc(e.keepRunContext), manager.RunnableFunc(func(ctx context.Context) error { return e.helmrelease.ReportQueues(ctx) }), manager.RunnableFunc(e.targets.Sweep), e.generator.Extracts()}
	if opts.HealthAddr != "" {
		runnables = append(runnables, manager.RunnableFunc(e.serveHealth))
	}
	if e.replicas != nil {
		runnables = append(runnables, e.replicas)
	}
	for _, r := range runnables {
		if err := mgr.Add(frame.EveryReplica{Runnable: r}); err != nil {
			return nil, err
		}
	}
	if err := e.addStatusPage(); err != nil {
		return nil, err
	}
	return e, nil
}

// apiHost is the host[:port] client-go labels the requests to host (a
// rest.Config's Host: a URL or host[:port]) with.
func apiHost(host string) string {
	if u, err := url.Parse(host); err == nil && u.Host != "" {
		return u.Host
	}
	return host
}

// artifactStore opens the store and binds its server. It binds first, so
// that a ":0" port is resolved once, by the listener that serves it, and
// the URLs written in status name that port.
func artifactStore(opts Options, missing func(context.Context, string) bool) (*source.Store, *source.Server, error) {
	ln, err := net.Listen("tcp", opts.ArtifactAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("artifact server on %s: %w", opts.ArtifactAddr, err)
	}
	if opts.ArtifactBaseURL == "" {
		addr := opts.ArtifactAddr
		if strings.HasSuffix(addr, ":0") {
			addr = ln.Addr().String()
		}
		opts.ArtifactBaseURL = "http://" + addr
	}
	store, err := source.NewStore(opts.DataDir, source.StoreOptions{BaseURL: opts.ArtifactBaseURL})
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("opening the artifact store in %s: %w", opts.DataDir, err)
	}
	server, err := source.NewServer(store, source.ServerOptions{Addr: opts.ArtifactAddr, Listener: ln, Missing: missing})
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return store, server, nil
}

var contextBackground = context.Background()

// keepRunContext makes the manager's context the one that waits started
// by reconcilers live in.
func (e *Engine) keepRunContext(ctx context.Context) error {
	e.runCtx.Store(&ctx)
	<-ctx.Done()
	return nil
}

// AddToScheme adds the types the engine reconciles to s, for a manager
// an embedder builds for Setup.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, sourcev1.AddToScheme,
		swv1beta1.AddToScheme, kustomizev1.AddToScheme, helmv2.AddToScheme, apiextensionsv1.AddToScheme,
		notifyv1.AddToScheme, notifyv1beta3.AddToScheme} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// Client returns the engine's cached client.
func (e *Engine) Client() client.Client { return e.mgr.GetClient() }

// Cache returns the engine's informer cache, shared by every reconciler.
func (e *Engine) Cache() cache.Cache { return e.mgr.GetCache() }

// Registry returns the registry the engine's metrics are in.
func (e *Engine) Registry() *prometheus.Registry { return e.registry }

// Store returns the artifact store.
func (e *Engine) Store() *source.Store { return e.store }

// ArtifactAddr returns the address the artifact server listens on.
func (e *Engine) ArtifactAddr() string { return e.server.Addr() }

// Start installs the CRDs when asked, then runs every reconciler until ctx
// ends. An engine built by Setup is started with its manager instead.
func (e *Engine) Start(ctx context.Context) error {
	if !e.ownManager {
		return errors.New("engine: built by Setup on the embedder's manager: start the manager instead")
	}
	if e.opts.InstallCRDs {
		if err := e.installCRDs(ctx); err != nil {
			return err
		}
	}
	if e.events != nil {
		// The manager leaves a broadcaster it was given running.
		defer e.events.Shutdown()
	}
	return e.mgr.Start(ctx)
}

// Add runs r with the engine. Unless r says otherwise
// (manager.LeaderElectionRunnable), it runs only on the leader when
// replicas are enabled, once this replica first leads: the bootstrap
// directory is applied so.
func (e *Engine) Add(r manager.Runnable) error {
	if e.replicas == nil || e.replicas.Leader == nil {
		return e.mgr.Add(r)
	}
	if le, ok := r.(manager.LeaderElectionRunnable); ok && !le.NeedLeaderElection() {
		return e.mgr.Add(r)
	}
	return e.mgr.Add(frame.EveryReplica{Runnable: manager.RunnableFunc(func(ctx context.Context) error {
		select {
		case <-e.replicas.FirstLead:
			return r.Start(ctx)
		case <-ctx.Done():
			return nil
		}
	})})
}

// maxHealthBody bounds a request body to the health server: its endpoints
// are GETs, and no handler reads a body.
const maxHealthBody = 4 << 10

// boundBody answers 413 to a request whose body is larger than limit: at
// once when its declared length says so, after reading limit+1 bytes at most
// when it has no declared length (chunked). Memory held per request stays
// under limit.
func boundBody(h http.Handler, limit int64) http.Handler {
	tooLarge := func(w http.ResponseWriter) {
		w.Header().Set("Connection", "close")
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			tooLarge(w)
			return
		}
		if r.ContentLength < 0 {
			b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
			if err != nil || int64(len(b)) > limit {
				tooLarge(w)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		h.ServeHTTP(w, r)
	})
}

// isLoopback tells whether a listener's address is a loopback one.
func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

func (e *Engine) serveHealth(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !e.mgr.GetCache().WaitForCacheSync(r.Context()) {
			http.Error(w, "informer caches not synced", http.StatusServiceUnavailable)
			return
		}
		msg := "ok"
		if e.replicas != nil {
			msg += "\n" + e.Replica().String()
		}
		if e.opts.ReadyzDetail != nil {
			msg += "\n" + e.opts.ReadyzDetail()
		}
		w.Write([]byte(msg))
	})
	mux.Handle("/metrics", frame.MetricsHandler(frame.APIHostOnly{Gatherer: e.registry, Host: apiHost(e.cfg.Host)}, e.metrics))
	if e.opts.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	ln, err := net.Listen("tcp", e.opts.HealthAddr)
	if err != nil {
		return fmt.Errorf("health server on %s: %w", e.opts.HealthAddr, err)
	}
	e.servePlans(mux, isLoopback(ln.Addr()))
	// Bounded like the webhook server: small headers, no request body
	// worth reading, and no slow request holding a connection.
	srv := &http.Server{Handler: boundBody(mux, maxHealthBody), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
