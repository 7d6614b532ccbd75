// Package hostile is the hostile-tenant end-to-end test of the tenant
// boundary (issue #46): the cozy-aio binary, run as a node runs it with
// its default policy, serves a well-behaved tenant's HelmReleases once
// alone and once beside a tenant whose namespace holds each attack as
// objects (kubeconfigs to the metadata address and to the node's loopback,
// a generic provider without the operator's opt-in, a Helm release record
// that inflates to 500 MiB, a Provider at the metadata address, a source
// redirecting to it, a kubeconfig Secret edited a thousand times, a
// credential in a URL).
//
// The test checks that every attack ends Ready=False or with a Warning
// naming the object and the field, that no connection reaches the refused
// listeners, that no credential text reaches anything the tenant can read,
// and compares the two runs' peak RSS and time to all Ready. Its figures
// are in BENCHMARKS.md ("Tenant boundary").
//
//	go test -count=1 -v -run TestHostileTenant ./internal/hostile/
package hostile
