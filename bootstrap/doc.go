// Package bootstrap starts cozy-aio on a fresh node before the pod network
// exists: it finds the API server without the cluster network, runs
// preflight checks, installs CRDs, loads bootstrap objects from host files,
// reconciles the network phase before everything else, and renders the
// static pod manifest. It does not reconcile Flux kinds itself; package
// engine does.
//
//	err := bootstrap.Run(ctx, bootstrap.RunOptions{
//		BootstrapDir: "/etc/cozy-aio/bootstrap",
//		Engine:       engine.Options{DataDir: "/var/lib/cozy-aio"},
//	}) // blocks until ctx ends
//
//	manifest, err := bootstrap.RenderStaticPod(bootstrap.StaticPodOptions{Image: image})
//
// The bootstrap directory is applied through package apply, like a
// Kustomization's objects, labelled BootstrapLabel; units labelled
// PhaseLabel: PhaseNetwork reconcile first, and every other unit waits until
// the nodes have a network (NodeNetworkReady).
package bootstrap
