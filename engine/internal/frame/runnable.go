package frame

import "sigs.k8s.io/controller-runtime/pkg/manager"

// EveryReplica runs a part of the engine on every replica, not only on
// the leader.
type EveryReplica struct{ manager.Runnable }

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (EveryReplica) NeedLeaderElection() bool { return false }
