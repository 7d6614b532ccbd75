package helm

import (
	"bytes"
	"fmt"
	"time"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/resource"
)

// CRDPolicy is what happens to the CRDs of a chart's crds/ directory.
type CRDPolicy string

// CRD policies.
const (
	// CRDCreate creates missing CRDs and leaves existing ones alone.
	CRDCreate CRDPolicy = "Create"
	// CRDCreateReplace creates missing CRDs and server-side-applies
	// existing ones (force-conflicts).
	CRDCreateReplace CRDPolicy = "CreateReplace"
	// CRDSkip leaves CRDs alone.
	CRDSkip CRDPolicy = "Skip"
)

func (p CRDPolicy) or(def CRDPolicy) CRDPolicy {
	if p == "" {
		return def
	}
	return p
}

// applyCRDs applies the CRDs of the chart's crds/ directory and of the
// subcharts its values enable (Helm's conditions and tags, evaluated as
// Helm's install does), by policy, waits until they are established and
// refreshes discovery, so that the chart's custom resources map. Objects
// other than CRDs in a crds/ directory are left out with a log line, as
// helm-controller does.
func (s *session) applyCRDs(p prepared, policy CRDPolicy, timeout time.Duration) error {
	if policy == CRDSkip {
		return nil
	}
	if policy != CRDCreate && policy != CRDCreateReplace {
		return fmt.Errorf("unknown CRD policy %q", policy)
	}
	if len(p.chart.CRDObjects()) == 0 {
		return nil
	}
	// The chart is this action's copy: Helm's install and upgrade process
	// the dependencies again, to the same result.
	if err := chartutil.ProcessDependencies(p.chart, p.values); err != nil {
		return fmt.Errorf("processing the chart's dependencies: %w", err)
	}
	var all kube.ResourceList
	var skipped []string
	for _, c := range p.chart.CRDObjects() {
		infos, err := s.kc.Build(bytes.NewReader(c.File.Data), false)
		if err != nil {
			return fmt.Errorf("CRD file %s: %w", c.Filename, err)
		}
		for _, info := range infos {
			if gvk := info.Mapping.GroupVersionKind; gvk.Group != "apiextensions.k8s.io" || gvk.Kind != "CustomResourceDefinition" {
				skipped = append(skipped, fmt.Sprintf("%s %s in %s", gvk.Kind, info.Name, c.Filename))
				continue
			}
			if err := applyCRD(info, policy); err != nil {
				return fmt.Errorf("CRD %s from %s: %w", info.Name, c.Filename, err)
			}
			all = append(all, info)
		}
	}
	if len(skipped) > 0 {
		s.m.log.Warn("ignoring objects that are not CRDs in the chart's crds/ directory; move them to templates/",
			"release", s.rel.String(), "objects", skipped)
	}
	if len(all) == 0 {
		return nil
	}
	w, err := s.kc.GetWaiterWithOptions(kube.StatusWatcherStrategy, s.waitOptions()...)
	if err != nil {
		return err
	}
	if err := w.Wait(all, timeout); err != nil {
		return fmt.Errorf("waiting for CRDs to be established: %w", err)
	}
	return s.awaitMappings(all, timeout)
}

// awaitMappings resets the REST mapper until every CRD's kind maps. An
// Established CRD is not yet in the API server's discovery documents,
// which follow it asynchronously; a mapper reset in between would keep
// answering "no matches for kind" for the chart's custom resources.
func (s *session) awaitMappings(crds kube.ResourceList, timeout time.Duration) error {
	mapper := s.c.getter.mapper
	deadline := time.Now().Add(timeout)
	for {
		s.c.getter.discovery.Invalidate()
		mapper.Reset()
		missing := ""
		for _, info := range crds {
			u, ok := info.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
			if kind == "" {
				continue
			}
			if _, err := mapper.RESTMapping(schema.GroupKind{Group: group, Kind: kind}); err != nil {
				if !meta.IsNoMatchError(err) {
					return err
				}
				missing = kind + "." + group
				break
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s is established but the API server's discovery does not serve it after %s", missing, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func applyCRD(info *resource.Info, p CRDPolicy) error {
	h := resource.NewHelper(info.Client, info.Mapping).WithFieldManager(fieldManager())
	if p == CRDCreate {
		_, err := h.Create(info.Namespace, true, info.Object)
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	u, ok := info.Object.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected object type %T", info.Object)
	}
	data, err := runtime.Encode(unstructured.UnstructuredJSONScheme, u)
	if err != nil {
		return err
	}
	force := true
	_, err = h.Patch(info.Namespace, info.Name, types.ApplyPatchType, data, &metav1.PatchOptions{Force: &force})
	return err
}
