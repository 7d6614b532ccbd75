package frame

// Finalizer is set on objects whose deletion must clean up: a pruning
// Kustomization deletes its inventory, as in Flux.
const Finalizer = "finalizers.fluxcd.io"
