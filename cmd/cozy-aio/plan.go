package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/plan"
)

// exitPlanError is the exit code of a plan that cannot be computed.
const exitPlanError = 3

// planCmd prints what applying a local kustomization directory would do
// to the live cluster, for review before a change merges: package plan's
// actions, field diffs and risks, as text or JSON. Each object that
// exists is compared with the API server's server-side dry-run of the
// apply. With --inventory, the objects of that Kustomization's inventory
// that the directory drops are deletions. The exit code is the plan's: 0
// nothing changes, 1 changes, 2 risky changes, 3 no plan.
func planCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default $KUBECONFIG, ~/.kube/config, else "+adminConf+")")
	dir := fs.String("kustomize", "", "the kustomization directory to plan (required)")
	inventory := fs.String("inventory", "", "NAMESPACE/NAME of the Kustomization that applies the directory: its inventory's objects the directory drops are deleted, its owner labels applied")
	fieldManager := fs.String("field-manager", "kustomize-controller", "the field manager of the apply")
	output := fs.String("o", "text", "text or json")
	all := fs.Bool("all", false, "list unchanged objects too (text)")
	timeout := fs.Duration("timeout", time.Minute, "longest wait for the API server")
	if err := fs.Parse(args); err != nil {
		return exitPlanError
	}
	p, err := planKustomize(*kubeconfig, *dir, *inventory, *fieldManager, *output, *timeout)
	if err == nil {
		if *output == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			err = enc.Encode(p)
		} else {
			err = p.WriteText(stdout, *all)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "cozy-aio plan:", err)
		return exitPlanError
	}
	return p.ExitCode()
}

func planKustomize(kubeconfig, dir, inventory, fieldManager, output string, timeout time.Duration) (*plan.Plan, error) {
	if dir == "" {
		return nil, fmt.Errorf("--kustomize: a directory is required")
	}
	if output != "text" && output != "json" {
		return nil, fmt.Errorf("-o %q: want text or json", output)
	}
	cfg, err := statusConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: engine.NewScheme()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	objs, err := apply.Build(ctx, dir, apply.BuildOptions{})
	if err != nil {
		return nil, err
	}
	dryRun := map[plan.Ref]bool{}
	in := plan.Input{DryRun: func(r plan.Ref) bool { return dryRun[r] }, Owner: plan.Owner{Inventory: inventory, FieldManager: fieldManager},
		Kept: func(u *unstructured.Unstructured) bool {
			return u.GetAnnotations()[apply.PruneAnnotation] == "disabled"
		}}
	live := map[plan.Ref]*unstructured.Unstructured{}
	var labels map[string]string
	if inventory != "" {
		ns, name, ok := strings.Cut(inventory, "/")
		if !ok {
			return nil, fmt.Errorf("--inventory %q: want NAMESPACE/NAME", inventory)
		}
		labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": name, "kustomize.toolkit.fluxcd.io/namespace": ns}
		if in.Current, err = inventoryObjects(ctx, c, ns, name); err != nil {
			return nil, err
		}
		for _, u := range in.Current {
			live[plan.RefOf(u)] = u
		}
	}
	for _, o := range objs {
		o = o.DeepCopy()
		if len(labels) > 0 {
			l := o.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			for k, v := range labels {
				l[k] = v
			}
			o.SetLabels(l)
		}
		have, err := get(ctx, c, o.GroupVersionKind(), o.GetNamespace(), o.GetName())
		if err != nil {
			return nil, err
		}
		if have == nil {
			in.Desired = append(in.Desired, o)
			continue
		}
		live[plan.RefOf(have)] = have
		dry := o.DeepCopy()
		err = c.Patch(ctx, dry, client.Apply, client.DryRunAll, client.ForceOwnership, client.FieldOwner(fieldManager)) //nolint:staticcheck // an unstructured apply
		switch {
		case apierrors.IsInvalid(err):
			// Refused, an immutable field for one: compared as rendered,
			// the plan names the risk.
			in.Desired = append(in.Desired, o)
		case err != nil:
			return nil, fmt.Errorf("%s: server-side dry-run: %w", plan.RefOf(o), err)
		default:
			dryRun[plan.RefOf(dry)] = true
			in.Desired = append(in.Desired, dry)
		}
	}
	in.Live = func(r plan.Ref) *unstructured.Unstructured { return live[r] }
	return plan.Compute(in)
}

// get reads an object, nil when it does not exist.
func get(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s/%s: %w", gvk.Kind, namespace, name, err)
	}
	return u, nil
}

// inventoryObjects reads the live objects of a Kustomization's inventory;
// those already gone are left out.
func inventoryObjects(ctx context.Context, c client.Reader, namespace, name string) ([]*unstructured.Unstructured, error) {
	var ks kustomizev1.Kustomization
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &ks); err != nil {
		return nil, fmt.Errorf("reading Kustomization %s/%s: %w", namespace, name, err)
	}
	if ks.Status.Inventory == nil {
		return nil, nil
	}
	var out []*unstructured.Unstructured
	for _, e := range ks.Status.Inventory.Entries {
		// The ID is namespace_name_group_kind, as Flux writes it.
		parts := strings.Split(e.ID, "_")
		if len(parts) != 4 {
			return nil, fmt.Errorf("Kustomization %s/%s: inventory entry %q is not namespace_name_group_kind", namespace, name, e.ID)
		}
		gvk := schema.GroupVersionKind{Group: parts[2], Version: e.Version, Kind: parts[3]}
		u, err := get(ctx, c, gvk, parts[0], parts[1])
		if err != nil {
			return nil, err
		}
		if u != nil {
			out = append(out, u)
		}
	}
	return out, nil
}
