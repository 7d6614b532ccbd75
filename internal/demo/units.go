package demo

import (
	"context"
	"fmt"
	"sort"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Unit is one Flux object the demo watches, as last seen.
type Unit struct {
	Kind, Namespace, Name string
	Ready                 bool
	// Settled is true when the unit is Ready, or has failed for a reason
	// that is not "still in progress".
	Settled bool
	Reason  string
	Message string
	// ReadySince is when Ready last changed.
	ReadySince time.Time
}

func (u Unit) String() string { return u.Kind + "/" + u.Namespace + "/" + u.Name }

// Kinds are the kinds the demo counts, in the order it prints them.
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

// listUnits reads every unit of every kind.
func listUnits(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]Unit, error) {
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
			obj, ok := it.(interface {
				metav1.Object
				GetConditions() []metav1.Condition
			})
			if !ok {
				continue
			}
			u := Unit{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
			var stalled bool
			for _, cond := range obj.GetConditions() {
				switch cond.Type {
				case "Ready":
					u.Ready = cond.Status == metav1.ConditionTrue && cond.ObservedGeneration >= obj.GetGeneration()
					u.Reason, u.Message, u.ReadySince = cond.Reason, cond.Message, cond.LastTransitionTime.Time
				case "Stalled":
					stalled = cond.Status == metav1.ConditionTrue
				}
			}
			u.Settled = u.Ready || stalled || (u.Reason != "" && !inProgress[u.Reason])
			out = append(out, u)
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

// Count is Ready out of Total units of one kind.
type Count struct {
	Kind         string
	Ready, Total int
}

func countUnits(units []Unit) []Count {
	by := map[string]*Count{}
	var out []Count
	for _, k := range Kinds {
		by[k] = &Count{Kind: k}
	}
	for _, u := range units {
		c := by[u.Kind]
		c.Total++
		if u.Ready {
			c.Ready++
		}
	}
	for _, k := range Kinds {
		out = append(out, *by[k])
	}
	return out
}
