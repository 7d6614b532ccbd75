package notify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
)

// Receiver types a Receiver may have.
const (
	ReceiverGeneric     = "generic"
	ReceiverGenericHMAC = "generic-hmac"
	ReceiverGitHub      = "github"
	ReceiverGitLab      = "gitlab"
	ReceiverHarbor      = "harbor"
	ReceiverDockerHub   = "dockerhub"
)

// ReceiverTypes lists the Receiver types the package verifies.
var ReceiverTypes = []string{ReceiverGeneric, ReceiverGenericHMAC, ReceiverGitHub, ReceiverGitLab, ReceiverHarbor, ReceiverDockerHub}

// Errors of Receiver.Verify; the Server answers each with its own status.
var (
	// ErrUnauthorized: the signature or token is missing or wrong (401).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrEventNotAllowed: the event is not in the Receiver's events (400).
	ErrEventNotAllowed = errors.New("event not allowed")
	// ErrBadPayload: the body is not what the type sends (400).
	ErrBadPayload = errors.New("bad payload")
	// ErrPing: a valid GitHub ping; answered 200, nothing reconciled.
	ErrPing = errors.New("ping")
)

// Receiver verifies webhook requests (Flux's Receiver spec with its token
// resolved).
type Receiver struct {
	// Type is one of ReceiverTypes.
	Type string
	// Token is the Secret's "token": the HMAC key or shared token.
	Token string
	// Events, when set, are the event types accepted (github, gitlab),
	// compared without case.
	Events []string
}

// Verify checks a request's headers and body as the sending service signs
// them; nil means the Receiver's resources should be reconciled.
func (r Receiver) Verify(h http.Header, body []byte) error {
	switch r.Type {
	case ReceiverGeneric:
		return nil
	case ReceiverGenericHMAC:
		return verifyHMAC(h.Get(SignatureHeader), body, r.Token)
	case ReceiverGitHub:
		sig := h.Get("X-Hub-Signature-256")
		if sig == "" {
			sig = h.Get("X-Hub-Signature")
		}
		if err := verifyHMAC(sig, body, r.Token); err != nil {
			return err
		}
		if !json.Valid(body) {
			return fmt.Errorf("%w: the GitHub payload is not JSON", ErrBadPayload)
		}
		event := h.Get("X-GitHub-Event")
		if strings.EqualFold(event, "ping") {
			return ErrPing
		}
		return r.allowed("GitHub", event)
	case ReceiverGitLab:
		if !equalToken(h.Get("X-Gitlab-Token"), r.Token) {
			return fmt.Errorf("%w: X-Gitlab-Token does not match the receiver token", ErrUnauthorized)
		}
		return r.allowed("GitLab", h.Get("X-Gitlab-Event"))
	case ReceiverHarbor:
		if !equalToken(h.Get("Authorization"), r.Token) {
			return fmt.Errorf("%w: the Authorization header does not match the receiver token", ErrUnauthorized)
		}
		return nil
	case ReceiverDockerHub:
		var p struct {
			PushData struct {
				Tag string `json:"tag"`
			} `json:"push_data"`
			Repository struct {
				URL string `json:"repo_url"`
			} `json:"repository"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return fmt.Errorf("%w: cannot decode the DockerHub payload", ErrBadPayload)
		}
		return nil
	}
	return fmt.Errorf("receiver type %q is not supported", r.Type)
}

func (r Receiver) allowed(service, event string) error {
	if len(r.Events) == 0 {
		return nil
	}
	for _, e := range r.Events {
		if strings.EqualFold(e, event) {
			return nil
		}
	}
	return fmt.Errorf("%w: the %s event %q is not in spec.events", ErrEventNotAllowed, service, event)
}

// verifyHMAC checks "<algo>=<hex HMAC of body>" with algo sha1, sha256 or
// sha512, in constant time.
func verifyHMAC(sig string, body []byte, key string) error {
	if sig == "" {
		return fmt.Errorf("%w: no signature header", ErrUnauthorized)
	}
	algo, digest, ok := strings.Cut(sig, "=")
	if !ok {
		return fmt.Errorf("%w: malformed signature", ErrUnauthorized)
	}
	var h func() hash.Hash
	switch algo {
	case "sha1":
		h = sha1.New
	case "sha256":
		h = sha256.New
	case "sha512":
		h = sha512.New
	default:
		return fmt.Errorf("%w: unknown signature algorithm %q", ErrUnauthorized, algo)
	}
	want, err := hex.DecodeString(digest)
	if err != nil {
		return fmt.Errorf("%w: malformed signature", ErrUnauthorized)
	}
	m := hmac.New(h, []byte(key))
	m.Write(body)
	if !hmac.Equal(m.Sum(nil), want) {
		return fmt.Errorf("%w: signature mismatch", ErrUnauthorized)
	}
	return nil
}

func equalToken(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// WebhookPath is the path Flux serves a Receiver on:
// /hook/<hex sha256 of token, name and namespace>.
func WebhookPath(token, name, namespace string) string {
	d := sha256.Sum256([]byte(token + name + namespace))
	return "/hook/" + hex.EncodeToString(d[:])
}
