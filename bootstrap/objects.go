package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BootstrapLabel marks objects that cozy-aio applied from the bootstrap
// directory; only such objects are ever pruned from it.
const BootstrapLabel = "cozy-aio.cozystack.io/bootstrap"

// FieldManager is the server-side apply field manager of bootstrap objects.
const FieldManager = "cozy-aio-bootstrap"

// LoadObjects reads every .yaml, .yml and .json file below dir (sorted by
// path) and returns the objects they hold. An error names the file and the
// document that failed.
func LoadObjects(dir string) ([]*unstructured.Unstructured, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if d.Type().IsRegular() {
				paths = append(paths, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading bootstrap directory %s: %w", dir, err)
	}
	sort.Strings(paths)
	var out []*unstructured.Unstructured
	for _, p := range paths {
		objs, err := decodeFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func decodeFile(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(bytes.NewReader(b)), 4096)
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		u := &unstructured.Unstructured{}
		if err := r.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d: apiVersion, kind and metadata.name are required", path, doc)
		}
		out = append(out, u)
	}
}

// ApplyOptions configures ApplyObjects. The zero value applies without
// pruning.
type ApplyOptions struct {
	// Prune deletes objects applied from the directory earlier (they carry
	// BootstrapLabel) that are no longer in it. Default: false: a file that
	// disappears leaves its objects in place.
	Prune bool
	// Previous lists the objects of the last run, for Prune.
	Previous []ObjectRef
}

// ObjectRef identifies an object.
type ObjectRef struct {
	APIVersion, Kind, Namespace, Name string
}

func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

func refOf(u *unstructured.Unstructured) ObjectRef {
	return ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// ApplyResult lists what ApplyObjects applied and pruned.
type ApplyResult struct {
	Applied []ObjectRef
	Pruned  []ObjectRef
}

// ApplyObjects server-side applies the bootstrap objects, labelled with
// BootstrapLabel, with force-conflicts. Re-running with the same objects
// changes nothing.
func ApplyObjects(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, opts ApplyOptions) (ApplyResult, error) {
	var res ApplyResult
	current := map[ObjectRef]bool{}
	for _, u := range objs {
		u = u.DeepCopy()
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[BootstrapLabel] = "true"
		u.SetLabels(labels)
		ref := refOf(u)
		if err := c.Patch(ctx, u, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return res, fmt.Errorf("applying bootstrap object %s: %w", ref, err)
		}
		current[ref] = true
		res.Applied = append(res.Applied, ref)
	}
	if !opts.Prune {
		return res, nil
	}
	for _, ref := range opts.Previous {
		if current[ref] {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(ref.APIVersion)
		u.SetKind(ref.Kind)
		if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return res, fmt.Errorf("reading bootstrap object %s for prune: %w", ref, err)
		}
		if u.GetLabels()[BootstrapLabel] != "true" {
			continue
		}
		if err := client.IgnoreNotFound(c.Delete(ctx, u)); err != nil {
			return res, fmt.Errorf("pruning bootstrap object %s: %w", ref, err)
		}
		res.Pruned = append(res.Pruned, ref)
	}
	return res, nil
}
