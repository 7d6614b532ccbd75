package demo

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// releaseRecord is one Helm release Secret (one revision), as its labels
// describe it.
type releaseRecord struct {
	Namespace, Name, Status, Holder string
	Version                         int
}

func (r releaseRecord) String() string {
	return fmt.Sprintf("%s/%s v%d %s by %q", r.Namespace, r.Name, r.Version, r.Status, r.Holder)
}

// recordsOf reads the labels Helm and cozy-aio put on release Secrets:
// owner=helm, name, status, version and helm.cozystack.io/holder.
func recordsOf(secrets []corev1.Secret) []releaseRecord {
	out := make([]releaseRecord, 0, len(secrets))
	for _, s := range secrets {
		l := s.Labels
		v, _ := strconv.Atoi(l["version"])
		out = append(out, releaseRecord{Namespace: s.Namespace, Name: l["name"], Status: l["status"], Holder: l[helm.LabelHolder], Version: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// checkRecords decides, from the release records, that each wanted
// release ("namespace/name") has exactly one revision, version 1 and
// deployed, and that no revision at all is pending (pending-install,
// pending-upgrade, pending-rollback). It returns the violations of each.
func checkRecords(records []releaseRecord, want []string) (once, pending []string) {
	by := map[string][]releaseRecord{}
	for _, r := range records {
		by[r.Namespace+"/"+r.Name] = append(by[r.Namespace+"/"+r.Name], r)
		if strings.HasPrefix(r.Status, "pending-") {
			pending = append(pending, r.String())
		}
	}
	for _, w := range want {
		revs := by[w]
		switch {
		case len(revs) == 0:
			once = append(once, w+" has no revision")
		case len(revs) > 1:
			var all []string
			for _, r := range revs {
				all = append(all, fmt.Sprintf("v%d %s by %q", r.Version, r.Status, r.Holder))
			}
			once = append(once, fmt.Sprintf("%s has %d revisions (%s)", w, len(revs), strings.Join(all, ", ")))
		case revs[0].Version != 1 || revs[0].Status != "deployed":
			once = append(once, fmt.Sprintf("%s has one revision, v%d %s, not v1 deployed", w, revs[0].Version, revs[0].Status))
		}
	}
	return once, pending
}

// wantedReleases names the Helm releases the run installs, as
// "namespace/name": each tenant's that render, and the network release.
func (h *harness) wantedReleases() []string {
	var out []string
	for _, t := range h.res.Tenants {
		if t.Broken {
			continue
		}
		for r := 1; r <= t.Releases; r++ {
			out = append(out, fmt.Sprintf("%s/app-%d", t.Name, r))
		}
	}
	if !h.opts.Scale {
		// Stored in the HelmRelease's namespace, as Flux stores it.
		out = append(out, SystemNamespace+"/"+NetworkRelease)
	}
	return out
}

// verifyReplicas checks a run with several replicas: the takeover after
// the leader's kill, where the shards ended, and that every release was
// installed exactly once with nothing left pending; it counts the
// revisions each replica wrote.
func (h *harness) verifyReplicas(ctx context.Context) {
	f := h.res.Failover
	h.check("takeover", !f.LeaderAt.IsZero() && !f.ShardsAt.IsZero(),
		"leader %s killed with %d of %d tenant HelmReleases Ready; %s led %.1fs later; its shards %s were owned by others %.1fs later; Leases %s/%s/%s",
		f.Killed, f.ReadyAtKill, h.tenantReleases()+h.clusterReleases(), f.NewLeader, f.LeaderTakeover().Seconds(),
		joinInts(f.Shards), f.ShardTakeover().Seconds(), demoLeaseDuration, demoRenewDeadline, demoRetryPeriod)
	h.verifyPlacement(ctx)
	h.verifyStatusWriters()
	var secrets corev1.SecretList
	if err := h.c.List(ctx, &secrets, client.MatchingLabels{"owner": "helm"}); err != nil {
		h.check("one revision each", false, "listing the release Secrets: %v", err)
		return
	}
	records := recordsOf(secrets.Items)
	want := h.wantedReleases()
	once, pending := checkRecords(records, want)
	h.check("one revision each", len(once) == 0,
		"%d releases, each with exactly one revision (v1, deployed), of %d release Secrets%s", len(want), len(records), joinBad(once))
	h.check("nothing pending", len(pending) == 0,
		"no release Secret is pending-install, pending-upgrade or pending-rollback%s", joinBad(pending))
	h.countRecords(records)
}

// countHolders counts the release revisions each replica wrote.
func (h *harness) countHolders(ctx context.Context) {
	var secrets corev1.SecretList
	if err := h.c.List(ctx, &secrets, client.MatchingLabels{"owner": "helm"}); err == nil {
		h.countRecords(recordsOf(secrets.Items))
	}
}

func (h *harness) countRecords(records []releaseRecord) {
	for _, r := range records {
		for i := range h.res.Replicas {
			if helm.RecordedID(h.res.Replicas[i].ID) == r.Holder {
				h.res.Replicas[i].Releases++
			}
		}
	}
}
