package helm

import (
	"encoding/json"

	"github.com/cozystack/cozy-aio/source"
)

// MergeValues deep-merges value layers: later layers win. Maps merge key by
// key; any other value, lists included, replaces the earlier one. A nil
// value is kept, so that Helm deletes the key from the chart's defaults.
// The layers are not modified. The chart's own defaults are not a layer:
// Helm merges the result over them when it renders.
func MergeValues(layers ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, l := range layers {
		mergeInto(out, l)
	}
	return out
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		sv, ok := v.(map[string]any)
		if !ok {
			dst[k] = copyValue(v)
			continue
		}
		dv, ok := dst[k].(map[string]any)
		if !ok {
			dv = map[string]any{}
			dst[k] = dv
		}
		mergeInto(dv, sv)
	}
}

func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = copyValue(x)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = copyValue(x)
		}
		return s
	default:
		return v
	}
}

// specDigest identifies what a release is asked to be: the chart archive
// and the merged values. It is short enough for a label value.
func specDigest(chartDigest string, values map[string]any, postRender string) string {
	b, _ := json.Marshal(values) // map keys are sorted: stable
	if postRender != "" {
		b = append(append(b, '\n'), postRender...)
	}
	return source.SHA256Hex(append([]byte(chartDigest+"\n"), b...))[:40]
}
