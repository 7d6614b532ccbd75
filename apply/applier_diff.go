package apply

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cozystack/cozy-aio/health"
)

// DiffOptions configures one Diff. The zero value works.
type DiffOptions struct {
	// Owner adds the owner labels to the objects before the comparison, as
	// Apply would. Default: none.
	Owner Owner
}

// Drift is how one object differs from its desired state.
type Drift struct {
	Object health.ObjectRef
	// Missing: the object does not exist.
	Missing bool
	// Fields are the paths that differ, such as "data.key" or
	// "spec.template.spec.containers[0].image", sorted. Values of Secrets
	// are never reported.
	Fields []string
}

// DiffResult lists the objects that drifted; objects that match are
// left out.
type DiffResult struct {
	Drifted []Drift
}

// Diff compares objs with the live objects through a server-side dry-run
// apply (nothing is written) and reports which objects drifted and which
// fields differ. Apply corrects what Diff finds.
func (a *Applier) Diff(ctx context.Context, objs []*unstructured.Unstructured, opts DiffOptions) (DiffResult, error) {
	if err := validateObjects(objs); err != nil {
		return DiffResult{}, err
	}
	drifts := make([]*Drift, len(objs))
	errs := make([]error, len(objs))
	sem := make(chan struct{}, a.opts.Concurrency)
	var wg sync.WaitGroup
	labels := opts.Owner.labels()
	for i, o := range objs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			drifts[i], errs[i] = a.diffOne(ctx, withLabels(o, labels).DeepCopy())
		}()
	}
	wg.Wait()
	var res DiffResult
	for _, d := range drifts {
		if d != nil {
			res.Drifted = append(res.Drifted, *d)
		}
	}
	return res, errors.Join(errs...)
}

func (a *Applier) diffOne(ctx context.Context, o *unstructured.Unstructured) (*Drift, error) {
	ref := health.RefOf(o)
	if _, err := a.mapping(ref); err != nil {
		return nil, err
	}
	entry, live, dry, err := a.manager.Diff(ctx, o, ssa.DefaultDiffOptions())
	if err != nil {
		return nil, fmt.Errorf("%s: dry-run diff: %w", ref, err)
	}
	switch entry.Action {
	case ssa.CreatedAction:
		return &Drift{Object: ref, Missing: true}, nil
	case ssa.ConfiguredAction:
		return &Drift{Object: ref, Fields: DiffFields(live, dry)}, nil
	}
	return nil, nil
}

// DiffFields returns the paths where the object want differs from live,
// ignoring status and server-managed metadata (only labels and annotations
// of the metadata are compared), sorted.
func DiffFields(live, want *unstructured.Unstructured) []string {
	strip := func(u *unstructured.Unstructured) map[string]any {
		m := make(map[string]any, len(u.Object))
		for k, v := range u.Object {
			if k != "status" && k != "metadata" {
				m[k] = v
			}
		}
		labels, _, _ := unstructured.NestedMap(u.Object, "metadata", "labels")
		annotations, _, _ := unstructured.NestedMap(u.Object, "metadata", "annotations")
		m["metadata"] = map[string]any{"labels": labels, "annotations": annotations}
		return m
	}
	var out []string
	diffValue("", strip(live), strip(want), &out)
	slices.Sort(out)
	return out
}

func diffValue(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for k, av := range am {
			diffValue(join(path, k), av, bm[k], out)
		}
		for k, bv := range bm {
			if _, ok := am[k]; !ok {
				diffValue(join(path, k), nil, bv, out)
			}
		}
		return
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			diffValue(path+"["+strconv.Itoa(i)+"]", as[i], bs[i], out)
		}
		return
	}
	if isEmpty(a) && isEmpty(b) {
		return
	}
	if !reflect.DeepEqual(normalizeNumber(a), normalizeNumber(b)) {
		*out = append(*out, path)
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case map[string]string:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

func normalizeNumber(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int32:
		return float64(n)
	case int64:
		return float64(n)
	case map[string]string:
		m := make(map[string]any, len(n))
		for k, s := range n {
			m[k] = s
		}
		return m
	}
	return v
}
