// Package bootstrap starts cozy-aio on a fresh node before the pod network
// exists: it finds the API server without the cluster network, runs
// preflight checks, installs CRDs, loads bootstrap objects from host files,
// reconciles the network phase before everything else, and renders the
// static pod manifest. It does not reconcile Flux kinds itself; package
// engine does.
package bootstrap
