package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/engine/internal/helmrelease"
	"github.com/cozystack/cozy-aio/plan"
)

// The upgrade hold (Options.UpgradeHold, docs/upgrade-preview.md).
const (
	// UpgradeHoldAnnotation sets a HelmRelease's hold policy: risky,
	// always or never.
	UpgradeHoldAnnotation = frame.HoldAnnotation
	// ApprovePlanAnnotation approves the held plan whose hash it carries.
	ApprovePlanAnnotation = frame.ApproveAnnotation
	// HeldCondition is True while a HelmRelease's install or upgrade
	// waits for an approval; its message names each risk and the plan's
	// hash.
	HeldCondition = frame.HeldCondition
)

// PlanHelmRelease returns the plan of the install or upgrade a
// reconcile of hr would run now with the chart archive at chartPath (of
// source revision chartRevision, "" for none), made as the engine makes
// it, without running it; nil when the release is up to date. It reads
// and plans as cfg's identity, against cfg's cluster.
func PlanHelmRelease(ctx context.Context, cfg *rest.Config, c client.Client, hr *helmv2.HelmRelease, chartPath, chartRevision string) (*plan.Plan, error) {
	if hr.Spec.KubeConfig != nil {
		return nil, fmt.Errorf("HelmRelease %s/%s installs to another cluster (spec.kubeConfig): plan it against that cluster's API server", hr.Namespace, hr.Name)
	}
	rel, o, err := helmrelease.PlanOptions(ctx, c, hr, chartPath, chartRevision)
	if err != nil {
		return nil, err
	}
	m, err := helm.New(cfg, helm.Options{})
	if err != nil {
		return nil, err
	}
	return m.Plan(ctx, rel, o)
}

// PlanRecord is a unit's last plan: of its last new desired state (a
// HelmRelease's install or upgrade, a Kustomization's new objects).
type PlanRecord struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Held is true while the plan waits for an approval.
	Held bool `json:"held"`
	// At is when the plan was made.
	At time.Time `json:"at"`
	// Plan is the plan (Secrets' values redacted).
	Plan *plan.Plan `json:"plan"`
}

// Plans returns the last plan of each HelmRelease and Kustomization this
// engine planned since it started (at most 4,096 per kind, the oldest
// go first), sorted by kind and unit.
func (e *Engine) Plans() []PlanRecord {
	var out []PlanRecord
	for _, ps := range []*frame.Plans{e.helmrelease.Plans(), e.kustomization.Plans()} {
		for _, p := range ps.All() {
			out = append(out, PlanRecord{Kind: p.Ref.Kind, Namespace: p.Ref.Namespace, Name: p.Ref.Name, Held: p.Held, At: p.At, Plan: p.Plan})
		}
	}
	return out
}

// servePlans serves Plans as JSON under /plans, and one unit's under
// /plans/KIND/NAMESPACE/NAME (404 when it has none): only on a loopback
// listener, as the plans show what tenants' objects hold.
func (e *Engine) servePlans(mux *http.ServeMux, loopback bool) {
	mux.HandleFunc("/plans/", func(w http.ResponseWriter, r *http.Request) {
		if !loopback {
			http.Error(w, "plans are served on a loopback --health-addr only", http.StatusForbidden)
			return
		}
		all := e.Plans()
		var body any = all
		if rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/plans/"), "/"); rest != "" {
			parts := strings.Split(rest, "/")
			if len(parts) != 3 {
				http.Error(w, "want /plans/KIND/NAMESPACE/NAME", http.StatusBadRequest)
				return
			}
			i := slices.IndexFunc(all, func(p PlanRecord) bool {
				return p.Kind == parts[0] && p.Namespace == parts[1] && p.Name == parts[2]
			})
			if i < 0 {
				http.Error(w, "no plan of "+rest, http.StatusNotFound)
				return
			}
			body = all[i]
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	})
	mux.HandleFunc("/plans", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/plans/", http.StatusMovedPermanently)
	})
}
