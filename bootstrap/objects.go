package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/health"
)

// BootstrapLabel marks objects that cozy-aio applied from the bootstrap
// directory; only such objects are ever pruned from it.
const BootstrapLabel = "cozy-aio.cozystack.io/bootstrap"

// fieldManager is the server-side apply field manager of bootstrap objects.
const fieldManager = "cozy-aio-bootstrap"

// owner labels the bootstrap objects when they are applied, and keeps a
// prune to the objects that carry the label.
var owner = apply.Owner{Labels: map[string]string{BootstrapLabel: "true"}}

// inventoryFile, in the data directory, records what the bootstrap
// directory applied, for a later prune.
const inventoryFile = "bootstrap-inventory.json"

// loadObjects reads every .yaml, .yml and .json file below dir (sorted by
// path) with apply.ReadObjects and returns the objects they hold. An error
// names the file and the document or object that failed.
func loadObjects(dir string) ([]*unstructured.Unstructured, error) {
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
		objs, err := readFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func readFile(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	objs, err := apply.ReadObjects(f, path)
	if err != nil {
		return nil, err
	}
	for i, u := range objs {
		if u.GetName() == "" {
			return nil, fmt.Errorf("%s: object %d: apiVersion, kind and metadata.name are required", path, i+1)
		}
	}
	return objs, nil
}

// applyResult is what applying the bootstrap directory did.
type applyResult struct {
	Applied, Pruned apply.ChangeSet
	// Inventory is what to remember for the next prune: the objects
	// applied, and without prune also those of the earlier runs.
	Inventory apply.Inventory
}

// applyObjects server-side applies the bootstrap objects through a,
// labelled with BootstrapLabel, with force-conflicts. With prune it then
// deletes the objects of previous that objs no longer hold and that still
// carry the label. Re-running with the same objects changes nothing.
func applyObjects(ctx context.Context, a *apply.Applier, objs []*unstructured.Unstructured, previous apply.Inventory, prune bool) (applyResult, error) {
	var res applyResult
	cs, err := a.Apply(ctx, objs, apply.ApplyOptions{Owner: owner})
	res.Applied = cs
	if err != nil {
		return res, fmt.Errorf("applying the bootstrap objects: %w", err)
	}
	current := cs.Inventory()
	if !prune {
		res.Inventory = apply.NewInventory(slices.Concat(previous.Entries, current.Entries)...)
		return res, nil
	}
	res.Pruned, err = a.Prune(ctx, cs.Stale(previous), apply.PruneOptions{Owner: owner})
	if err != nil {
		return res, fmt.Errorf("pruning the bootstrap objects: %w", err)
	}
	res.Inventory = current
	return res, nil
}

// readInventory reads the inventory file, in the layout of a
// Kustomization's status.inventory. The file an older cozy-aio wrote, a
// list of apiVersion, kind, namespace and name, is read once: the next
// write replaces it. A missing or unreadable file is an empty inventory.
func readInventory(path string) apply.Inventory {
	b, err := os.ReadFile(path)
	if err != nil {
		return apply.Inventory{}
	}
	var inv apply.Inventory
	if err := json.Unmarshal(b, &inv); err == nil {
		return inv
	}
	var old []struct{ APIVersion, Kind, Namespace, Name string }
	if err := json.Unmarshal(b, &old); err != nil {
		return apply.Inventory{}
	}
	refs := make([]health.ObjectRef, 0, len(old))
	for _, o := range old {
		gv, _ := schema.ParseGroupVersion(o.APIVersion)
		refs = append(refs, health.ObjectRef{Group: gv.Group, Version: gv.Version, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})
	}
	return apply.NewInventory(refs...)
}

func writeInventory(path string, inv apply.Inventory) error {
	b, err := json.Marshal(inv)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("recording bootstrap inventory: %w", err)
	}
	return nil
}
