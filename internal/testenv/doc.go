// Package testenv provides the real components that tests and the demo run
// against: a kube-apiserver and etcd built from their Go modules (through
// controller-runtime envtest), a Git server over HTTP, an OCI registry
// running in-process on loopback, and SeaweedFS as an S3-compatible server
// (built by hack/testbin.sh like the control plane). It is internal: it is
// not part of the library API.
package testenv
