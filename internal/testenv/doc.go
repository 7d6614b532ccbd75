// Package testenv provides the real components that tests and the demo run
// against: a kube-apiserver and etcd built from their Go modules (through
// controller-runtime envtest), a Git server over HTTP, and an OCI registry
// running in-process on loopback. It is internal: it is not part of the
// library API.
package testenv
