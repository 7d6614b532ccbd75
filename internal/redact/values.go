package redact

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
)

// minValue is the shortest secret Values masks: masking every "a" of a
// message would garble it and hide nothing a guess would not find.
const minValue = 4

// Values returns s with each of secrets masked in the forms a value takes
// in text: raw, base64 (standard and URL alphabets, padded or not) and
// URL-escaped (query and path). Secrets shorter than 4 bytes are left.
// Base64 is matched for the value encoded on its own, as a Secret's data
// or a Basic header holds it, not at any offset of a larger encoding.
func Values(s string, secrets ...[]byte) string {
	var forms []string
	for _, v := range secrets {
		if len(v) < minValue {
			continue
		}
		forms = append(forms, string(v),
			base64.StdEncoding.EncodeToString(v), base64.RawStdEncoding.EncodeToString(v),
			base64.URLEncoding.EncodeToString(v), base64.RawURLEncoding.EncodeToString(v),
			url.QueryEscape(string(v)), url.PathEscape(string(v)))
	}
	// Longest first: the padded base64 form contains the unpadded one, and
	// an escaped form may contain the raw value.
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	for _, f := range forms {
		s = strings.ReplaceAll(s, f, Mask)
	}
	return s
}
