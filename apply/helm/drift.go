package helm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/fluxcd/pkg/ssa/jsondiff"
	ssautils "github.com/fluxcd/pkg/ssa/utils"

	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/cozystack/cozy-aio/apply"
)

// DriftMode says what Reconcile does about drift of a deployed release.
type DriftMode string

// Drift modes.
const (
	// DriftDisabled does not look. The default.
	DriftDisabled DriftMode = ""
	// DriftDetect reports drifted objects only.
	DriftDetect DriftMode = "Detect"
	// DriftCorrect reports and re-applies drifted objects.
	DriftCorrect DriftMode = "Correct"
)

// DriftedObject is an object of the release that differs from its manifest.
type DriftedObject struct {
	// Kind, Namespace and Name identify the object.
	Kind, Namespace, Name string
	// Missing is true when the object does not exist.
	Missing bool
}

func (o DriftedObject) String() string {
	s := o.Kind + "/"
	if o.Namespace != "" {
		s += o.Namespace + "/"
	}
	s += o.Name
	if o.Missing {
		s += " (missing)"
	}
	return s
}

// DriftOptions configures Drift.
type DriftOptions struct {
	// Correct re-applies the drifted objects. Default: report only.
	Correct bool
	// Ignore lists JSON pointers, per object selector, that are neither
	// compared nor corrected (spec.driftDetection.ignore): a correction
	// keeps their live values. Default: none.
	Ignore []jsondiff.IgnoreRule
}

// Drift compares the objects of the deployed release with its manifest by
// a server-side-apply dry run of each object (the same field manager and
// force-conflicts as Helm's apply): an object is drifted when the dry run
// would change it, or when it is missing. With Correct, drifted objects
// are applied for real.
func (m *Manager) Drift(ctx context.Context, rel Release, o DriftOptions) ([]DriftedObject, error) {
	return locked(ctx, m, rel, ActionCorrectDrift, func() ([]DriftedObject, error) {
		s, err := m.newSession(ctx, rel, 0)
		if err != nil {
			return nil, wrap(rel, ActionCorrectDrift, err)
		}
		return s.drift(o.Correct, o.Ignore)
	})
}

func (s *session) drift(correct bool, ignore []jsondiff.IgnoreRule) ([]DriftedObject, error) {
	rules, err := jsondiff.CompileIgnoreRules(ignore)
	if err != nil {
		return nil, wrap(s.rel, ActionCorrectDrift, fmt.Errorf("driftDetection.ignore: %w", err))
	}
	h, err := s.history()
	if err != nil {
		return nil, wrap(s.rel, ActionCorrectDrift, err)
	}
	d := h.deployed()
	if d == nil {
		return nil, wrap(s.rel, ActionCorrectDrift, fmt.Errorf("%w: no deployed revision", ErrReleaseNotFound))
	}
	infos, err := s.kc.Build(strings.NewReader(d.Manifest), false)
	if err != nil {
		return nil, wrap(s.rel, ActionCorrectDrift, err)
	}
	var drifted []DriftedObject
	var fix kube.ResourceList
	for _, info := range infos {
		setHelmMetadata(info, d.Name, d.Namespace)
		u, _ := info.Object.(*unstructured.Unstructured)
		if u != nil && ssautils.AnyInMetadata(u, driftExclusion) {
			continue
		}
		paths := apply.IgnoredPaths(rules, u)
		obj, live, err := driftOf(info, paths)
		if err != nil {
			return drifted, wrap(s.rel, ActionCorrectDrift, err)
		}
		if live != nil && ssautils.AnyInMetadata(live, driftExclusion) {
			continue
		}
		if obj != nil {
			drifted = append(drifted, *obj)
			if err := apply.KeepLiveValues(u, live, paths); err != nil {
				return drifted, wrap(s.rel, ActionCorrectDrift, err)
			}
			fix = append(fix, info)
		}
	}
	if !correct || len(fix) == 0 {
		return drifted, nil
	}
	err = s.step(ActionCorrectDrift, func() error {
		for _, info := range fix {
			if _, err := ssa(info, false); err != nil {
				return err
			}
		}
		return nil
	})
	return drifted, err
}

// driftOf returns the drifted object, or nil when info is as applied,
// leaving out the ignored paths, and the live object when it exists.
func driftOf(info *resource.Info, ignored []string) (*DriftedObject, *unstructured.Unstructured, error) {
	obj := &DriftedObject{Kind: info.Mapping.GroupVersionKind.Kind, Namespace: info.Namespace, Name: info.Name}
	got, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
	if apierrors.IsNotFound(err) {
		obj.Missing = true
		return obj, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("getting %s: %w", obj, err)
	}
	live := &unstructured.Unstructured{Object: comparable(got)}
	dry, err := ssa(info, true)
	if err != nil {
		return nil, nil, err
	}
	want := &unstructured.Unstructured{Object: comparable(dry)}
	if len(ignored) > 0 {
		a, b := live.DeepCopy(), want
		for _, u := range []*unstructured.Unstructured{a, b} {
			if err := jsondiff.ApplyPatchToUnstructured(u, jsondiff.GenerateRemovePatch(ignored...)); err != nil {
				return nil, nil, fmt.Errorf("%s: driftDetection.ignore: %w", obj, err)
			}
		}
		if reflect.DeepEqual(a.Object, b.Object) {
			return nil, live, nil
		}
		return obj, live, nil
	}
	if reflect.DeepEqual(live.Object, want.Object) {
		return nil, live, nil
	}
	return obj, live, nil
}

// driftExclusion is helm-controller's opt-out of drift detection, on the
// manifest or the live object.
var driftExclusion = map[string]string{"helm.toolkit.fluxcd.io/driftDetection": "disabled"}

// ssa server-side-applies info with force-conflicts.
func ssa(info *resource.Info, dryRun bool) (runtime.Object, error) {
	data, err := runtime.Encode(unstructured.UnstructuredJSONScheme, info.Object)
	if err != nil {
		return nil, err
	}
	force := true
	out, err := resource.NewHelper(info.Client, info.Mapping).DryRun(dryRun).WithFieldManager(fieldManager()).
		Patch(info.Namespace, info.Name, types.ApplyPatchType, data, &metav1.PatchOptions{Force: &force})
	if err != nil {
		return nil, fmt.Errorf("applying %s %s/%s: %w", info.Mapping.GroupVersionKind.Kind, info.Namespace, info.Name, err)
	}
	return out, nil
}

// comparable drops what changes without a change of content.
func comparable(o runtime.Object) map[string]any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil
	}
	if md, ok := u["metadata"].(map[string]any); ok {
		for _, k := range []string{"managedFields", "resourceVersion", "generation"} {
			delete(md, k)
		}
	}
	return u
}

// setHelmMetadata adds the ownership marks Helm adds when it applies, so
// that the dry run does not see their absence as a change.
func setHelmMetadata(info *resource.Info, name, namespace string) {
	if u, ok := info.Object.(*unstructured.Unstructured); ok {
		setOwnerMarks(u, name, namespace)
	}
}

// fieldManager is the field manager Helm's apply uses, so that drift
// correction and CRD apply share field ownership with it.
func fieldManager() string {
	if kube.ManagedFieldsManager != "" {
		return kube.ManagedFieldsManager
	}
	if os.Args[0] == "" {
		return "unknown"
	}
	return filepath.Base(os.Args[0])
}
