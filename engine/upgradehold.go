package engine

import (
	"context"
	"fmt"

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
