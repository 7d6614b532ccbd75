package plan

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// serverFields are the fields the API server writes, which a new state
// never sets: left out of every diff.
var serverFields = map[string]bool{
	"metadata.resourceVersion": true, "metadata.generation": true, "metadata.managedFields": true,
	"metadata.creationTimestamp": true, "metadata.uid": true, "metadata.selfLink": true,
	"metadata.deletionTimestamp": true, "metadata.deletionGracePeriodSeconds": true, "status": true,
	"apiVersion": true,
}

// removed stands for a field the apply removes, in walk.
type removed struct{}

// maxValue bounds a value shown in a Change.
const maxValue = 256

// diff returns the fields desired sets that live holds otherwise, as a
// server-side apply would change them: a field live has and desired does
// not set is not desired's to change, unless whole (desired is a dry-run
// result): then it is removed. A Secret's data (and stringData, compared
// as the data it becomes) shows Redacted.
func diff(r Ref, live, desired *unstructured.Unstructured, whole bool) []Change {
	want := desired.Object
	secret := r.Group == "" && r.Kind == "Secret"
	if secret {
		want = secretAsData(want)
	}
	var out []Change
	walk("", live.Object, want, whole, func(path string, old, new any, oldSet bool) {
		if serverFields[path] || serverFields[strings.SplitN(path, ".", 2)[0]] {
			return
		}
		c := Change{Path: path}
		if _, gone := new.(removed); !gone {
			c.New = show(new)
		}
		if oldSet {
			c.Old = show(old)
		}
		if secret && (path == "data" || strings.HasPrefix(path, "data.")) {
			c.New = Redacted
			if oldSet {
				c.Old = Redacted
			}
		}
		out = append(out, c)
	})
	return out
}

// walk calls changed for every leaf of want that differs from have: maps
// key by key (want's keys, and with whole have's too), lists as wholes
// when their lengths differ, else element by element.
func walk(path string, have, want any, whole bool, changed func(path string, old, new any, oldSet bool)) {
	wm, ok := want.(map[string]any)
	if hm, hok := have.(map[string]any); ok && hok {
		for _, k := range slices.Sorted(maps.Keys(wm)) {
			hv, set := hm[k]
			p := join(path, k)
			if !set {
				if !empty(wm[k]) {
					changed(p, nil, wm[k], false)
				}
				continue
			}
			walk(p, hv, wm[k], whole, changed)
		}
		if whole {
			for _, k := range slices.Sorted(maps.Keys(hm)) {
				if _, set := wm[k]; !set && !empty(hm[k]) {
					changed(join(path, k), hm[k], removed{}, true)
				}
			}
		}
		return
	}
	wl, ok := want.([]any)
	if hl, hok := have.([]any); ok && hok && len(wl) == len(hl) {
		for i := range wl {
			walk(fmt.Sprintf("%s[%d]", path, i), hl[i], wl[i], whole, changed)
		}
		return
	}
	if !equal(have, want) {
		changed(path, have, want, true)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	if strings.ContainsAny(key, ".[]") {
		return path + "[" + key + "]"
	}
	return path + "." + key
}

// equal compares two leaves as JSON does: 1 and 1.0 are equal.
func equal(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// empty tells whether a value the live object lacks is one the API server
// drops (null, {}, []), which no apply changes.
func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > maxValue {
		return string(b[:maxValue]) + "…"
	}
	return string(b)
}

// secretAsData returns a Secret's object with stringData merged into data
// (base64), as the API server stores it.
func secretAsData(obj map[string]any) map[string]any {
	sd, ok := obj["stringData"].(map[string]any)
	if !ok {
		return obj
	}
	out := maps.Clone(obj)
	delete(out, "stringData")
	data := map[string]any{}
	if d, ok := obj["data"].(map[string]any); ok {
		maps.Copy(data, d)
	}
	for k, v := range sd {
		if s, ok := v.(string); ok {
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
	}
	out["data"] = data
	return out
}

// subset tells whether every field want sets is the same in have.
func subset(have, want any) bool {
	same := true
	walk("", have, want, false, func(string, any, any, bool) { same = false })
	return same
}

// field returns the value at path in u, nil when absent.
func field(u *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return v
}
