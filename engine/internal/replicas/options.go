package replicas

import (
	"os"
	"strings"
	"time"
)

// Options configure how several engines (replicas, for example the
// static pod on each control-plane node) share one cluster. They coordinate
// only through coordination.k8s.io Leases in Namespace:
//   - the leader (Lease LeaderLease) runs the source, ArtifactGenerator and
//     Kustomization reconcilers and writes their status;
//   - each replica holds a Lease of its own, <LeasePrefix>replica-<id>,
//     while it lives;
//   - Helm shard i runs only on the replica holding <LeasePrefix>shard-<i>;
//     which replica should hold it is shard.Spread of the live replicas.
//
// The zero value is off: the engine runs everything, as a single instance.
type Options struct {
	// Enabled turns leader election and shard ownership on.
	// Default: false.
	Enabled bool
	// Namespace holds the Leases. Default: the namespace this process runs
	// in ($POD_NAMESPACE, else the service account's), else kube-system.
	Namespace string
	// LeaderLease names the leader's Lease. Default: cozy-aio-leader.
	LeaderLease string
	// LeasePrefix starts the names of the replica and shard Leases.
	// Default: "cozy-aio-".
	LeasePrefix string
	// LeaseDuration is how long a Lease that is not renewed stays held;
	// RenewDeadline is how long a holder retries renewing before it gives
	// up (and stops writing); RetryPeriod is the interval between attempts.
	// Defaults: 15s, 10s and 2s, as Kubernetes' own controllers.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// HandoffGrace bounds the wait for a shard's running Helm actions
	// before its Lease is released, on a rebalance or at shutdown. The
	// actions still running then are cancelled and write no release record
	// any more; the next owner recovers their pending revisions as after a
	// crash. Default: 30s.
	HandoffGrace time.Duration
}

func (o Options) WithDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = ownNamespace()
	}
	if o.LeaderLease == "" {
		o.LeaderLease = "cozy-aio-leader"
	}
	if o.LeasePrefix == "" {
		o.LeasePrefix = "cozy-aio-"
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.LeaseDuration, 15*time.Second)
	def(&o.RenewDeadline, 10*time.Second)
	def(&o.RetryPeriod, 2*time.Second)
	def(&o.HandoffGrace, 30*time.Second)
	return o
}

// ownNamespace is the namespace this process runs in, or kube-system
// (where the static pod runs).
func ownNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "kube-system"
}
