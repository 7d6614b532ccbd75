package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// SignatureHeader carries the HMAC of a generic-hmac body:
// "sha256=<hex of HMAC-SHA256(token, body)>", as Flux sends it.
const SignatureHeader = "X-Signature"

// componentHeader names the controller that reported the event, as Flux's
// generic provider sets it.
const componentHeader = "gotk-component"

// generic posts Flux's event payload unchanged; with hmacKey set it signs
// the body (generic-hmac).
type generic struct {
	c       *httpClient
	url     string
	headers map[string]string
	hmacKey []byte
}

func (g *generic) post(ctx context.Context, ev *Event) error {
	return g.c.postJSON(ctx, g.url, ev, func(r *http.Request, body []byte) {
		r.Header.Set(componentHeader, ev.ReportingController)
		for k, v := range g.headers {
			r.Header.Set(k, v)
		}
		if g.hmacKey != nil {
			r.Header.Set(SignatureHeader, Sign(g.hmacKey, body))
		}
	})
}

// Sign returns the X-Signature value of body under key:
// "sha256=<hex HMAC-SHA256>".
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
