package cluster

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// withheldTransport keeps what a server that is not a Kubernetes API server
// answers out of the engine's errors, and so out of the statuses and
// Events a tenant reads: a kubeconfig may name any server the destination
// policy allows, such as a service of the management cluster's network
// that the tenant cannot reach itself. client-go quotes an error answer's
// body when it is not a Kubernetes Status; here such an answer keeps its
// status code, and its body says only what kind of answer it was.
type withheldTransport struct {
	next http.RoundTripper
}

// apiMediaTypes are the media types a Kubernetes API server answers with.
var apiMediaTypes = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "application/cbor"}

func (t *withheldTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 || apiAnswer(resp.Header.Get("Content-Type")) {
		return resp, err
	}
	ct := resp.Header.Get("Content-Type")
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	msg := fmt.Sprintf("answer withheld: HTTP %d with Content-Type %q is not a Kubernetes API answer", resp.StatusCode, mediaType(ct))
	resp.Body = io.NopCloser(strings.NewReader(msg))
	resp.ContentLength = int64(len(msg))
	resp.Header = http.Header{"Content-Type": {"text/plain"}}
	return resp, nil
}

func apiAnswer(contentType string) bool {
	mt := mediaType(contentType)
	for _, t := range apiMediaTypes {
		if mt == t {
			return true
		}
	}
	return false
}

// mediaType returns the media type of a Content-Type header without its
// parameters, or "none"; never more than a short token of what was sent.
func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt == "" {
		return "none"
	}
	if len(mt) > 64 {
		mt = mt[:64]
	}
	return mt
}
