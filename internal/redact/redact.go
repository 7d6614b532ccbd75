package redact

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"strings"
)

// Mask is what a secret is replaced with.
const Mask = "***"

// String returns s with everything that has the shape of a secret masked.
// It is a pure function of s, safe for any text.
func String(s string) string {
	for _, r := range rules {
		s = r(s)
	}
	return s
}

// rules run in order: a rule that masks a whole value (a PEM block, an
// Authorization header) runs before the narrower rules that would mask part
// of it.
var rules = []func(string) string{
	// A PEM private key, to its END line, or to the end of a text cut short.
	replace(`(?s)(-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----).*?(-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|\z)`, "${1}"+Mask+"${2}"),
	// Header values whose scheme varies (Bearer, Basic, token, cookies):
	// the whole value, to the end of the line, quote or bracket (Go prints
	// an http.Header as map[Authorization:[…]]).
	replace(`(?i)\b((?:proxy-)?authorization|cookie|set-cookie)("?[ \t]*[:=][ \t]*\[?"?)[^\r\n"\]]+`, "${1}${2}"+Mask),
	// Key material as kubeconfig, YAML or JSON writes it (one value, quoted
	// or a word), and as key=value text does (ending at & too, as in a URL).
	replace(`(?i)\b(`+keyNames+`)("?[ \t]*:[ \t]*)(?:"[^"\r\n]*"|'[^'\r\n]*'|[^\s"',;}\]]+)`, "${1}${2}"+Mask),
	replace(`(?i)\b(`+keyNames+`)(=)(?:"[^"\r\n]*"|'[^'\r\n]*'|[^\s"',;}\]&#]+)`, "${1}${2}"+Mask),
	// A bearer token outside a header, as a message may quote it.
	replace(`(?i)\b(bearer)[ \t]+[A-Za-z0-9\-._~+/]+=*`, "${1} "+Mask),
	maskBasic,
	// Userinfo of any scheme: up to the last @ before the path, since a
	// password with an unescaped @ is still a password.
	replace(`(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#"'<>]+@`, "${1}"+Mask+"@"),
	// Query parameters that carry credentials: tokens, presigned-URL
	// signatures and credentials (S3's X-Amz-*, GCS's X-Goog-*, Azure's sig),
	// API keys, OAuth codes.
	replace(`(?i)([?&;](?:[a-z0-9_.\-]*(?:token|secret|passw|signature|credential|api[-_]?key)[a-z0-9_.\-]*|sig|key|code|auth|pwd|pass)=)[\w\-.~%+/=*]+`, "${1}"+Mask),
	// Chat webhooks whose path is the credential: Slack, Teams (Office 365
	// connectors), Discord and its look-alikes, Mattermost and Rocket.Chat,
	// Telegram bots.
	replace(`(?i)(hooks\.slack\.com/|(?:webhook\.office\.com|outlook\.office(?:365)?\.com)/|/api/webhooks/|://[^/\s"'<>@]+/hooks/)[\w\-.~%+=@/]+`, "${1}"+Mask),
	replace(`(?i)(/bot)[0-9]+:[A-Za-z0-9_\-]+`, "${1}"+Mask),
	// An age identity, as SOPS keeps it.
	replace(`(?i)AGE-SECRET-KEY-1[0-9A-Z]+`, "AGE-SECRET-KEY-"+Mask),
}

// keyNames are the keys whose value is a credential in kubeconfig, YAML,
// JSON, HTTP headers and connection strings (Azure's SharedAccessKey).
const keyNames = `client-key-data|client-certificate-data|client[-_]secret|(?:id|refresh|access|private|auth)[-_]token|token|` +
	`password|passwd|api[-_]?key|sharedaccesskey|accountkey`

func replace(pattern, template string) func(string) string {
	re := regexp.MustCompile(pattern)
	return func(s string) string { return re.ReplaceAllString(s, template) }
}

var basicCredentials = regexp.MustCompile(`(?i)\b(basic)[ \t]+([A-Za-z0-9+/]+=*)`)

// maskBasic masks "Basic <base64>" only when the base64 decodes to
// user:password, so that prose such as "basic authentication" stays.
func maskBasic(s string) string {
	return basicCredentials.ReplaceAllStringFunc(s, func(m string) string {
		sub := basicCredentials.FindStringSubmatch(m)
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(sub[2], "="))
		if err != nil || !bytes.ContainsRune(b, ':') {
			return m
		}
		return sub[1] + " " + Mask
	})
}
