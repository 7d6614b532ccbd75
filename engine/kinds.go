package engine

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kinds lists the reconcilers the engine runs.
func (e *Engine) kinds() []kindController {
	src := e.sources.Reconcilers()
	return []kindController{
		{kind: sourcev1.GitRepositoryKind, newObject: func() client.Object { return &sourcev1.GitRepository{} }, reconciler: src[0].Reconciler},
		{kind: sourcev1.OCIRepositoryKind, newObject: func() client.Object { return &sourcev1.OCIRepository{} }, reconciler: src[1].Reconciler},
		{kind: sourcev1.BucketKind, newObject: func() client.Object { return &sourcev1.Bucket{} }, reconciler: src[2].Reconciler},
		{kind: sourcev1.HelmRepositoryKind, newObject: func() client.Object { return &sourcev1.HelmRepository{} }, reconciler: src[3].Reconciler},
		{kind: sourcev1.HelmChartKind, newObject: func() client.Object { return &sourcev1.HelmChart{} }, reconciler: src[4].Reconciler},
		{kind: kustomizev1.KustomizationKind, newObject: func() client.Object { return &kustomizev1.Kustomization{} }, reconciler: e.kustomization},
		{kind: helmv2.HelmReleaseKind, newObject: func() client.Object { return &helmv2.HelmRelease{} }, reconciler: e.helmrelease},
		{kind: swv1beta1.ArtifactGeneratorKind, newObject: func() client.Object { return &swv1beta1.ArtifactGenerator{} }, reconciler: e.generator},
	}
}
