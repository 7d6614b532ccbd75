package frame

import (
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// EveryReplica runs a part of the engine on every replica, not only on
// the leader.
type EveryReplica struct{ manager.Runnable }

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (EveryReplica) NeedLeaderElection() bool { return false }

// The causes with which a replica cancels the Helm work of a shard it no
// longer runs: the work writes no status after them.
var (
	ErrShardLost = errors.New("this replica lost the shard's Lease")
	ErrHandedOff = errors.New("the shard was handed off to another replica")
)
