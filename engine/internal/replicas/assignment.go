package replicas

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/shard"
)

// The shared assignment. Placement with memory keeps a tenant on its shard
// unless the balance needs it elsewhere, but it depends on the assignment
// before, which replicas must share or they disagree on which shard owns a
// tenant. The leader publishes the assignment in the ConfigMap
// <LeasePrefix>shard-assignment: the shard IDs and each tenant's shard.
// Every replica, the leader included, places with it as the previous
// assignment (shard.Pool.Anchor), which makes its placement a function of
// the HelmReleases it sees and of that ConfigMap only: replicas that see
// the same ones agree, as they did without memory.
//
// The leader publishes the assignment its own pool computes whenever it
// differs from the published one; the others then compute that same
// assignment (Assign with its own result as Previous returns it), so a
// publication moves no tenant. A shard count change is published as the new
// shard IDs with the assignment before them: every replica computes the
// same resize from it, and the next publication records the result. The
// leader decides the count (Options.Shards, else shard.Count with its
// hysteresis, which the shared count makes safe for replicas).
//
// The Helm fencing stays the guarantee that a release never runs on two
// replicas at once: the shard Leases (mayWrite) and, while two replicas'
// views differ for the moment a watch event takes, the release records'
// resourceVersion preconditions and pending-revision holders.

const (
	roleAssignment = "assignment"
	// assignmentShards holds the shard IDs, comma-separated.
	assignmentShards = "shards"
	// assignmentTenants holds the gzipped tenants: one line per shard, the
	// shard ID and then its tenants in order, separated by spaces.
	assignmentTenants = "tenants.gz"
	// maxAssignmentBytes bounds the gzipped tenants well within the 1 MiB
	// of a ConfigMap; a larger assignment is published without tenants, and
	// replicas then place without memory over the published shards.
	maxAssignmentBytes = 768 << 10
)

// published is an assignment read from the ConfigMap.
type published struct {
	shards  []int
	Tenants map[string]int // nil when the ConfigMap holds none
}

func (r *Replicas) assignmentName() string { return r.o.LeasePrefix + "shard-assignment" }

// encodeAssignment returns the ConfigMap data of an assignment; tenants
// is nil when the tenants are too many to publish.
func encodeAssignment(shards []int, tenants map[string]int) (data map[string]string, binary map[string][]byte, err error) {
	ids := make([]string, len(shards))
	for i, s := range shards {
		ids[i] = strconv.Itoa(s)
	}
	data = map[string]string{assignmentShards: strings.Join(ids, ",")}
	byShard := map[int][]string{}
	for id, s := range tenants {
		if id == "" || strings.ContainsAny(id, " \t\r\n") {
			return nil, nil, fmt.Errorf("tenant %q cannot be published", id)
		}
		byShard[s] = append(byShard[s], id)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	for _, s := range slices.Sorted(maps.Keys(byShard)) {
		fmt.Fprint(zw, s)
		for _, id := range slices.Sorted(slices.Values(byShard[s])) {
			fmt.Fprint(zw, " ", id)
		}
		fmt.Fprintln(zw)
	}
	if err := zw.Close(); err != nil {
		return nil, nil, err
	}
	if buf.Len() > maxAssignmentBytes {
		return data, nil, nil
	}
	return data, map[string][]byte{assignmentTenants: buf.Bytes()}, nil
}

// decodeAssignment reads a published assignment.
func decodeAssignment(cm *corev1.ConfigMap) (published, error) {
	var p published
	for f := range strings.SplitSeq(cm.Data[assignmentShards], ",") {
		s, err := strconv.Atoi(f)
		if err != nil || s < 0 {
			return published{}, fmt.Errorf("ConfigMap %s/%s: shard %q is not a shard ID", cm.Namespace, cm.Name, f)
		}
		p.shards = append(p.shards, s)
	}
	slices.Sort(p.shards)
	if len(slices.Compact(slices.Clone(p.shards))) != len(p.shards) {
		return published{}, fmt.Errorf("ConfigMap %s/%s: duplicate shard IDs", cm.Namespace, cm.Name)
	}
	gz, ok := cm.BinaryData[assignmentTenants]
	if !ok {
		return p, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return published{}, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	// Bounded: a tenant ID is a label value or a namespace name.
	raw, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return published{}, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	p.Tenants = map[string]int{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		s, err := strconv.Atoi(f[0])
		if err != nil {
			return published{}, fmt.Errorf("ConfigMap %s/%s: shard %q is not a shard ID", cm.Namespace, cm.Name, f[0])
		}
		for _, id := range f[1:] {
			p.Tenants[id] = s
		}
	}
	return p, nil
}

// observeAssignment anchors the pool to a published assignment. It runs on
// the informer's goroutine, without r.mu: the pool calls back into r.
func (r *Replicas) observeAssignment(o any) {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok || cm.Name != r.assignmentName() {
		return
	}
	p, err := decodeAssignment(cm)
	if err != nil {
		r.log.Error(err, "reading the published shard assignment")
		return
	}
	r.anchor(p)
}

// anchor places with p as the previous assignment.
func (r *Replicas) anchor(p published) {
	r.PubMu.Lock()
	defer r.PubMu.Unlock()
	if err := r.deps.Pool().Anchor(p.shards, p.Tenants); err != nil {
		r.log.Error(err, "placing with the published shard assignment")
		return
	}
	r.Pub = &p
	r.poke()
}

// publishAssignment is the leader's part: it publishes the assignment of
// its pool, or the shard IDs of a new count, when they differ from the
// published ones.
func (r *Replicas) publishAssignment(ctx context.Context) {
	if !r.Leading() {
		return
	}
	r.PubMu.Lock()
	pub := r.Pub
	r.PubMu.Unlock()
	a := r.deps.Pool().Assignment()
	n := r.deps.Shards
	if n <= 0 {
		cur := 0
		if pub != nil {
			cur = len(pub.shards)
		}
		total, heaviest := r.deps.Pool().Weights()
		n = shard.Count(cur, total, heaviest.Weight, shard.CountOptions{})
	}
	shards, tenants := shard.Range(n), a.Tenants
	if !slices.Equal(a.Shards, shards) {
		// A new count: every replica resizes from the same assignment.
		if pub != nil {
			tenants = pub.Tenants
		}
	} else if pub != nil && slices.Equal(pub.shards, shards) {
		if maps.Equal(pub.Tenants, tenants) {
			return
		}
		if pub.Tenants == nil {
			// Published without tenants, as too many: still so?
			if _, binary, err := encodeAssignment(shards, tenants); err == nil && binary == nil {
				return
			}
		}
	}
	if err := r.writeAssignment(ctx, shards, tenants); err != nil {
		r.log.Error(err, "publishing the shard assignment")
	}
}

// writeAssignment creates or updates the ConfigMap; the update carries the
// resourceVersion read, so that of two writers one fails.
func (r *Replicas) writeAssignment(ctx context.Context, shards []int, tenants map[string]int) error {
	data, binary, err := encodeAssignment(shards, tenants)
	if err != nil {
		return err
	}
	cms := r.cs.CoreV1().ConfigMaps(r.o.Namespace)
	cm, err := cms.Get(ctx, r.assignmentName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: leaseMeta(r.o.Namespace, r.assignmentName())}
		cm.Labels = map[string]string{LabelLeaseRole: roleAssignment}
		cm.Data, cm.BinaryData = data, binary
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	case err == nil:
		cm.Data, cm.BinaryData = data, binary
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels[LabelLeaseRole] = roleAssignment
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return nil // another writer was first: its write comes back through the informer
	}
	if err != nil {
		return err
	}
	r.log.V(1).Info("published the shard assignment", "shards", len(shards), "tenants", len(tenants), "bytes", len(binary[assignmentTenants]))
	return nil
}
