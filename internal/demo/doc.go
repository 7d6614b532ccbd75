// Package demo runs cozy-aio's main job end to end on this machine: a
// simulated fresh cluster (internal/testenv) whose nodes have no network,
// a Git server and an OCI registry serving the platform, and the cozy-aio
// binary run as a node runs it. It installs the network first, then every
// tenant, prints live progress and a summary, and verifies the run from
// the objects' timestamps. With Options.Replicas above one it runs that many
// cozy-aio processes, as on that many control-plane nodes, kills the leader
// with SIGKILL mid-install, and checks the takeover and that every release
// was installed exactly once. `make demo` and `make bench-scale` run it;
// its test is the smaller end-to-end scenario of `make test`.
package demo
