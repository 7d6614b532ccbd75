package replicas

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func lease(name, role, holder, shard string) *coordinationv1.Lease {
	d := int32(15)
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelLeaseRole: role, LabelShard: shard}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &now},
	}
}

// View reports the live replicas and each shard's holder from the Leases
// seen; a released shard has no holder.
func TestViewFromLeases(t *testing.T) {
	r := &Replicas{seen: map[string]leaseSeen{}, shards: map[int]*shardLease{}, kick: make(chan struct{}, 1)}
	r.observe(lease("cozy-aio-node-2", roleReplica, "node-2", ""), false)
	r.observe(lease("cozy-aio-node-1", roleReplica, "node-1", ""), false)
	r.observe(lease("cozy-aio-shard-0", roleShard, "node-1", "0"), false)
	r.observe(lease("cozy-aio-shard-1", roleShard, "node-2", "1"), false)
	r.observe(lease("cozy-aio-shard-2", roleShard, "", "2"), false)
	v := r.View()
	if len(v.Live) != 2 || v.Live[0] != "node-1" || v.Live[1] != "node-2" {
		t.Errorf("live %v", v.Live)
	}
	if len(v.Holders) != 2 || v.Holders[0] != "node-1" || v.Holders[1] != "node-2" {
		t.Errorf("holders %v", v.Holders)
	}
}
