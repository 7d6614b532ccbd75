// Package targets is the engine's shared room for the clusters units deploy
// to: this one and the remote ones of spec.kubeConfig, each with its Helm
// manager, health waiter and appliers (one per identity), the registry that
// builds, sweeps and counts them, and what a unit reads of its cluster
// (ClusterOf, HelmManagerOf). It imports no family of kinds.
package targets
