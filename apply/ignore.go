package apply

import (
	"strconv"
	"strings"

	"github.com/fluxcd/pkg/ssa/jsondiff"
	jsondiffpatch "github.com/wI2L/jsondiff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// IgnoredPaths returns the JSON pointers of the rules whose selector
// matches u.
func IgnoredPaths(rules jsondiff.CompiledIgnoreRules, u *unstructured.Unstructured) []string {
	if u == nil {
		return nil
	}
	var out []string
	for sel, paths := range rules {
		if sel == nil || sel.MatchUnstructured(u) {
			out = append(out, paths...)
		}
	}
	return out
}

// KeepLiveValues sets the ignored paths of the desired object u to their live
// values (or removes them when the live object has none), so that a
// correction leaves them as they are.
func KeepLiveValues(u, live *unstructured.Unstructured, paths []string) error {
	if u == nil || live == nil || len(paths) == 0 {
		return nil
	}
	var patch jsondiffpatch.Patch
	for _, p := range paths {
		if v, ok := pointerValue(live.Object, p); ok {
			patch = append(patch, jsondiffpatch.Operation{Type: jsondiffpatch.OperationAdd, Path: p, Value: v})
		} else {
			patch = append(patch, jsondiffpatch.Operation{Type: jsondiffpatch.OperationRemove, Path: p})
		}
	}
	return jsondiff.ApplyPatchToUnstructured(u, patch)
}

// pointerValue returns the value at the JSON pointer p (RFC 6901) in obj.
func pointerValue(obj map[string]any, p string) (any, bool) {
	var cur any = obj
	for _, seg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
