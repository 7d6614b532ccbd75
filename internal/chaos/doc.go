// Package chaos is cozy-aio's reliability campaign: it runs the real
// cozy-aio binary (internal/demo's Process) against the real test control
// plane, Git server and OCI registry (internal/testenv), injects faults at
// seeded random instants — SIGKILL of cozy-aio, a wiped data directory,
// kube-apiserver restarts, etcd paused, the Git server and the registry
// down, slow or answering 500s — while HelmReleases and Kustomizations are
// installed, upgraded, rolled back and uninstalled, and checks after every
// fault, once the system settles, the invariants of docs/reliability.md
// (Check, pure functions over a Snapshot read from the API server).
// `make chaos` runs the full campaign, sized by CHAOS_* variables; its
// small version is TestCampaign in `make test`.
package chaos
