package decrypt

import (
	"bytes"
	"encoding/base64"
	stdjson "encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/getsops/sops/v3/cmd/sops/formats"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// markers tell, by a substring, that a Secret data value is a SOPS
// document and in which format, as kustomize-controller detects them. A
// binary document is a JSON envelope, so JSON covers it.
var markers = []struct {
	format formats.Format
	marker []byte
}{
	{formats.Yaml, []byte("mac: ENC[")},
	{formats.Json, []byte(`"mac": "ENC[`)},
	{formats.Dotenv, []byte("sops_mac=ENC[")},
	{formats.Ini, []byte("[sops]")},
}

// Encrypted reports whether obj carries SOPS metadata with a MAC, the
// objects Object decrypts as a whole.
func Encrypted(obj *unstructured.Unstructured) bool {
	mac, _, _ := unstructured.NestedString(obj.Object, "sops", "mac")
	return mac != ""
}

// MAC returns the SOPS MAC of an encrypted object, which identifies the
// document it was rendered from (kustomize never changes it), or "".
func MAC(obj *unstructured.Unstructured) string {
	mac, _, _ := unstructured.NestedString(obj.Object, "sops", "mac")
	return mac
}

// Object decrypts obj in place, as kustomize-controller decrypts a rendered
// object: an object of any kind that carries SOPS metadata with a MAC is
// decrypted as a whole (its sops field goes); in a Secret without it, each
// data value that holds a SOPS document (a secretGenerator over an
// encrypted file that Sources did not decrypt) is decrypted into the
// format its key's extension names. Object reports whether obj changed.
func (d *Decryptor) Object(obj *unstructured.Unstructured) (bool, error) {
	ref := objectRef(obj)
	if Encrypted(obj) {
		in, err := stdjson.Marshal(obj.Object)
		if err != nil {
			return false, fmt.Errorf("%s: %w", ref, err)
		}
		plain, err := d.decryptData(ref, in, formats.Json, formats.Json)
		if err != nil {
			return false, err
		}
		out := map[string]any{}
		if err := stdjson.Unmarshal(plain, &out); err != nil {
			return false, fmt.Errorf("%s: the decrypted object is not JSON", ref)
		}
		obj.Object = out
		return true, nil
	}
	if obj.GetKind() != "Secret" || obj.GetAPIVersion() != "v1" {
		return false, nil
	}
	data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	changed := false
	for _, key := range keys {
		raw, err := base64.StdEncoding.DecodeString(data[key])
		if err != nil {
			continue // not base64: the API server reports it, as in Flux
		}
		in, ok := detect(raw)
		if !ok {
			continue
		}
		plain, err := d.decryptData(fmt.Sprintf("%s data %q", ref, key), raw, in, formatForPath(key))
		if err != nil {
			return false, err
		}
		data[key] = base64.StdEncoding.EncodeToString(plain)
		changed = true
	}
	if changed {
		if err := unstructured.SetNestedStringMap(obj.Object, data, "data"); err != nil {
			return false, fmt.Errorf("%s: %w", ref, err)
		}
	}
	return changed, nil
}

func detect(b []byte) (formats.Format, bool) {
	for _, m := range markers {
		if bytes.Contains(b, m.marker) {
			return m.format, true
		}
	}
	return 0, false
}

// formatForPath is SOPS' format for a file name, where a Docker config
// (.dockerconfigjson) is JSON, as in Flux.
func formatForPath(p string) formats.Format {
	if strings.HasSuffix(p, ".dockerconfigjson") {
		return formats.Json
	}
	return formats.FormatForPath(p)
}

func objectRef(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s/%s/%s", obj.GetKind(), ns, obj.GetName())
	}
	return fmt.Sprintf("%s/%s", obj.GetKind(), obj.GetName())
}
