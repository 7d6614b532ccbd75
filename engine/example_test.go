package engine_test

import (
	"context"
	"log"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cozystack/cozy-aio/engine"
)

// The engine alone: it installs its CRDs and runs every reconciler until
// ctx ends.
func ExampleNew() {
	cfg := ctrl.GetConfigOrDie()
	e, err := engine.New(cfg, engine.Options{DataDir: "/var/lib/cozy-aio", InstallCRDs: true})
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// Three replicas, for example one on each control-plane node: the same
// options on each, a distinct HolderID. One leads (sources, generators,
// Kustomizations); the Helm shards are spread over all three.
func ExampleNew_replicas() {
	node, _ := os.Hostname()
	e, err := engine.New(ctrl.GetConfigOrDie(), engine.Options{
		DataDir:     "/var/lib/cozy-aio",
		InstallCRDs: true,
		HolderID:    node,
		Replicas: engine.ReplicaOptions{
			Enabled:   true,
			Namespace: "kube-system",
			// Kubernetes' defaults; shorter Leases mean faster takeovers
			// and more API requests while idle.
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Fatal(err)
	}
}

// An operator runs the engine on its own manager: one cache, one client,
// one leader election for its controllers and the engine's.
func ExampleSetup() {
	scheme := runtime.NewScheme()
	if err := engine.AddToScheme(scheme); err != nil {
		log.Fatal(err)
	}
	cfg := ctrl.GetConfigOrDie()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:           scheme,
		LeaderElection:   true,
		LeaderElectionID: "my-operator",
	})
	if err != nil {
		log.Fatal(err)
	}
	// The operator's own controllers are set up on mgr here.
	if _, err := engine.Setup(mgr, engine.Options{DataDir: "/var/lib/my-operator"}); err != nil {
		log.Fatal(err)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := engine.InstallCRDs(ctx, cfg, "my-operator"); err != nil {
		log.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		log.Fatal(err)
	}
}
