package status

import (
	"context"
	"fmt"
	"sort"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Unit is one Flux object, as last read.
type Unit struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Ready     bool   `json:"ready"`
	// Settled is true when the unit is Ready, or has failed for a reason
	// that is not "still in progress" and is not Reconciling.
	Settled bool   `json:"settled"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// ReadySince is when Ready last changed.
	ReadySince time.Time `json:"readySince,omitzero"`
	// Cluster names the remote cluster a HelmRelease or Kustomization
	// deploys to (spec.kubeConfig), as the engine's metrics name it:
	// "Secret ns/name" or "ConfigMap ns/name"; empty for this cluster.
	Cluster string `json:"cluster,omitempty"`
}

func (u Unit) String() string { return u.Kind + "/" + u.Namespace + "/" + u.Name }

// Kinds are the kinds counted, in the order they are printed.
var Kinds = []string{
	sourcev1.GitRepositoryKind, sourcev1.OCIRepositoryKind, swv1beta1.ArtifactGeneratorKind,
	sourcev1.ExternalArtifactKind, kustomizev1.KustomizationKind, helmv2.HelmReleaseKind,
}

func newList(kind string) client.ObjectList {
	switch kind {
	case sourcev1.GitRepositoryKind:
		return &sourcev1.GitRepositoryList{}
	case sourcev1.OCIRepositoryKind:
		return &sourcev1.OCIRepositoryList{}
	case swv1beta1.ArtifactGeneratorKind:
		return &swv1beta1.ArtifactGeneratorList{}
	case sourcev1.ExternalArtifactKind:
		return &sourcev1.ExternalArtifactList{}
	case kustomizev1.KustomizationKind:
		return &kustomizev1.KustomizationList{}
	default:
		return &helmv2.HelmReleaseList{}
	}
}

// inProgress are Ready=False reasons that mean "not done yet" rather than
// "failed".
var inProgress = map[string]bool{
	"": true, "Progressing": true, "ProgressingWithRetry": true,
	"DependencyNotReady": true, "PhasePending": true, "Reconciling": true, "Queued": true,
}

// ListUnits reads every unit of every kind in Kinds, sorted by kind,
// namespace and name. The reader's scheme must hold the Flux types
// (engine.NewScheme).
func ListUnits(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]Unit, error) {
	var out []Unit
	for _, kind := range Kinds {
		list := newList(kind)
		if err := c.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing %s: %w", kind, err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if obj, ok := it.(conditioned); ok {
				u := unitOf(kind, obj)
				u.Cluster = clusterOf(obj)
				out = append(out, u)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, nil
}

type conditioned interface {
	metav1.Object
	GetConditions() []metav1.Condition
}

func unitOf(kind string, obj conditioned) Unit {
	u := Unit{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	var stalled, reconciling bool
	for _, cond := range obj.GetConditions() {
		switch cond.Type {
		case "Ready":
			u.Ready = cond.Status == metav1.ConditionTrue && cond.ObservedGeneration >= obj.GetGeneration()
			u.Reason, u.Message, u.ReadySince = cond.Reason, cond.Message, cond.LastTransitionTime.Time
		case "Stalled":
			stalled = cond.Status == metav1.ConditionTrue
		case "Reconciling":
			reconciling = cond.Status == metav1.ConditionTrue
		}
	}
	// Reconciling=True says the object is still on its way, whatever
	// Ready's reason (kstatus reads it so too): a release waiting for its
	// source's first artifact is Ready=False ArtifactFailed and Reconciling
	// until the source wakes it.
	u.Settled = u.Ready || stalled || (!reconciling && u.Reason != "" && !inProgress[u.Reason])
	return u
}

// Count is Ready out of Total units of one kind.
type Count struct {
	Kind  string `json:"kind"`
	Ready int    `json:"ready"`
	Total int    `json:"total"`
}

// CountUnits counts the units of each kind in Kinds, in that order.
func CountUnits(units []Unit) []Count {
	by := map[string]*Count{}
	for _, k := range Kinds {
		by[k] = &Count{Kind: k}
	}
	for _, u := range units {
		c := by[u.Kind]
		if c == nil {
			continue
		}
		c.Total++
		if u.Ready {
			c.Ready++
		}
	}
	out := make([]Count, 0, len(Kinds))
	for _, k := range Kinds {
		out = append(out, *by[k])
	}
	return out
}

// clusterOf names the remote cluster of a unit with spec.kubeConfig.
func clusterOf(obj conditioned) string {
	var ref *meta.KubeConfigReference
	switch o := obj.(type) {
	case *helmv2.HelmRelease:
		ref = o.Spec.KubeConfig
	case *kustomizev1.Kustomization:
		ref = o.Spec.KubeConfig
	}
	switch {
	case ref == nil:
		return ""
	case ref.SecretRef != nil:
		return "Secret " + obj.GetNamespace() + "/" + ref.SecretRef.Name
	case ref.ConfigMapRef != nil:
		return "ConfigMap " + obj.GetNamespace() + "/" + ref.ConfigMapRef.Name
	}
	return ""
}

// UnitOf reads one Flux object as a Unit of the given kind; false when it
// has no conditions to read.
func UnitOf(kind string, obj client.Object) (Unit, bool) {
	c, ok := obj.(conditioned)
	if !ok {
		return Unit{}, false
	}
	u := unitOf(kind, c)
	u.Cluster = clusterOf(c)
	return u, true
}
