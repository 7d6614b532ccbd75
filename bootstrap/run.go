package bootstrap

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/engine"
)

// RunOptions configures Run. The zero value discovers the API server,
// applies no bootstrap objects and needs one node with a network.
type RunOptions struct {
	// Config, when set, is used as is and discovery is skipped.
	Config *rest.Config
	// Discover finds the API server when Config is nil.
	Discover DiscoverOptions
	// BootstrapDir holds YAML applied after the CRDs. Default: none.
	BootstrapDir string
	// PruneBootstrap deletes objects whose files left BootstrapDir.
	// Default: false.
	PruneBootstrap bool
	// Network says when the network phase is over.
	Network NetworkOptions
	// SkipNetworkPhase admits every unit from the start, for clusters whose
	// network is not managed by cozy-aio. Default: false.
	SkipNetworkPhase bool
	// Engine configures the engine. Its Gate and ReadyzDetail are set by
	// Run; InstallCRDs is implied.
	Engine engine.Options
	// Logger logs the steps. Default: discard.
	Logger logr.Logger
	// Started, when set, is called once, from a goroutine of its own, when
	// the engine's caches have synced: start-up (discovery, the CRDs, the
	// first lists of every watched kind) is over and the units run.
	// cozy-aio gives back the executable's start-up pages there.
	Started func()
}

// Run starts cozy-aio on a node: it finds the API server, checks that it
// can work, installs the CRDs, applies the bootstrap objects, and runs the
// engine with the network phase first. It blocks until ctx ends.
func Run(ctx context.Context, opts RunOptions) error {
	log := opts.Logger
	if opts.Engine.DataDir == "" {
		// The engine's default, settled here: the bootstrap keeps its own
		// files there before the engine exists.
		opts.Engine.DataDir = filepath.Join(os.TempDir(), "cozy-aio")
	}
	cfg := opts.Config
	var fallbacks []string
	if cfg == nil {
		d := opts.Discover
		if len(d.Fallbacks) == 0 {
			d.Fallbacks = readEndpoints(opts.Engine.DataDir)
		}
		ep, err := discover(ctx, d)
		if err != nil {
			return err
		}
		log.Info("API server found", "candidate", ep.Kind, "host", ep.Config.Host)
		cfg = ep.Config
	}
	c, err := client.New(cfg, client.Options{Scheme: engine.NewScheme()})
	if err != nil {
		return err
	}
	report := preflight(ctx, cfg, c, preflightOptions{DataDir: opts.Engine.DataDir})
	for _, check := range report {
		log.Info(check.String())
	}
	if err := report.Err(); err != nil {
		return err
	}
	if fallbacks, err = apiServerEndpoints(ctx, c); err == nil {
		writeEndpoints(opts.Engine.DataDir, fallbacks)
	}
	install := engine.InstallCRDs
	if opts.Engine.Replicas.Enabled {
		// The leader updates the CRDs that differ (below).
		install = engine.InstallMissingCRDs
	}
	if err := install(ctx, cfg, opts.Engine.FieldManager); err != nil {
		return err
	}
	log.Info("CRDs installed")
	if !opts.Engine.Replicas.Enabled {
		if err := applyBootstrapDir(ctx, cfg, opts, log); err != nil {
			return err
		}
	}
	if opts.Engine.Registry == nil {
		// The engine's default; set here so the phase gauge lands beside it.
		opts.Engine.Registry = ctrlmetrics.Registry.(*prometheus.Registry)
	}
	phases := newPhaseGate(opts.Engine.Registry)
	if opts.SkipNetworkPhase {
		phases.Observe(true, "")
	}
	eopts := opts.Engine
	eopts.Gate = phases.Gate
	eopts.ReadyzDetail = phases.Readyz
	var e *engine.Engine
	if eopts.StatusPage.Addr != "" && eopts.StatusPage.Nodes == nil {
		eopts.StatusPage.Nodes = func(ctx context.Context) ([]engine.StatusNode, error) { return nodesOf(ctx, e) }
	}
	e, err = engine.New(cfg, eopts)
	if err != nil {
		return err
	}
	if opts.Engine.Replicas.Enabled {
		// Only the leader updates the CRDs and applies the bootstrap
		// directory: replicas of different versions, or on nodes whose
		// directories differ (mid-upgrade), must not fight.
		err := e.Add(manager.RunnableFunc(func(ctx context.Context) error {
			if err := engine.InstallCRDs(ctx, cfg, opts.Engine.FieldManager); err != nil {
				return err
			}
			return applyBootstrapDir(ctx, cfg, opts, log)
		}))
		if err != nil {
			return err
		}
	}
	if err := watchNetwork(ctx, e, phases, opts.Network, log); err != nil {
		return err
	}
	if opts.Started != nil {
		go func() {
			if e.Cache().WaitForCacheSync(ctx) {
				opts.Started()
			}
		}()
	}
	log.Info("phase", "phase", PhaseNetwork)
	return e.Start(ctx)
}

// watchNetwork re-evaluates the network on every Node event from the
// engine's cache, and opens the gate once the nodes have a network.
func watchNetwork(ctx context.Context, e *engine.Engine, phases *phaseGate, opts NetworkOptions, log logr.Logger) error {
	inf, err := e.Cache().GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	evaluate := func() {
		var nodes corev1.NodeList
		if err := e.Cache().List(ctx, &nodes); err != nil {
			return
		}
		ready, why := networkReady(nodes.Items, opts)
		if phases.Observe(ready, why) {
			log.Info("phase", "phase", phaseAll, "reason", "nodes have a network")
			if err := e.Wake(ctx); err != nil {
				log.Error(err, "waking units after the network phase")
			}
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { evaluate() },
		UpdateFunc: func(any, any) { evaluate() },
		DeleteFunc: func(any) { evaluate() },
	})
	// With no nodes there is no event: evaluate once the cache has synced,
	// so the reason says so.
	go func() {
		if e.Cache().WaitForCacheSync(ctx) {
			evaluate()
		}
	}()
	return err
}

// nodesOf reports each node's network for the status page.
func nodesOf(ctx context.Context, e *engine.Engine) ([]engine.StatusNode, error) {
	var nodes corev1.NodeList
	if err := e.Cache().List(ctx, &nodes); err != nil {
		return nil, err
	}
	out := make([]engine.StatusNode, 0, len(nodes.Items))
	for i := range nodes.Items {
		ok, why := NodeNetworkReady(&nodes.Items[i])
		out = append(out, engine.StatusNode{Name: nodes.Items[i].Name, Network: ok, Reason: why})
	}
	return out, nil
}

// applyBootstrapDir applies the bootstrap directory through an Applier of
// its own field manager, and records what it applied in the data directory.
func applyBootstrapDir(ctx context.Context, cfg *rest.Config, opts RunOptions, log logr.Logger) error {
	if opts.BootstrapDir == "" {
		return nil
	}
	objs, err := loadObjects(opts.BootstrapDir)
	if err != nil {
		return err
	}
	a, err := apply.New(cfg, apply.Options{FieldManager: fieldManager})
	if err != nil {
		return err
	}
	invPath := filepath.Join(opts.Engine.DataDir, inventoryFile)
	res, err := applyObjects(ctx, a, objs, readInventory(invPath), opts.PruneBootstrap)
	if err != nil {
		return err
	}
	log.Info("bootstrap objects applied", "dir", opts.BootstrapDir, "applied", len(res.Applied.Changes), "pruned", res.Pruned.Count(apply.Deleted))
	return writeInventory(invPath, res.Inventory)
}

func readEndpoints(dataDir string) []string {
	var out []string
	if b, err := os.ReadFile(filepath.Join(dataDir, "apiserver-endpoints.json")); err == nil {
		_ = json.Unmarshal(b, &out)
	}
	return out
}

func writeEndpoints(dataDir string, eps []string) {
	if b, err := json.Marshal(eps); err == nil && dataDir != "" {
		_ = os.WriteFile(filepath.Join(dataDir, "apiserver-endpoints.json"), b, 0o600)
	}
}
