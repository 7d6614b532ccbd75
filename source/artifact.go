package source

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
	"time"
)

// Artifact is one stored, complete tar.gz: what a fetch or a generator
// produced, where it lives and how to check it.
type Artifact struct {
	// Path is the slash-separated location relative to the store root,
	// in Flux's layout: <kind>/<namespace>/<name>/<file>.
	Path string `json:"path"`
	// URL is where the HTTP server serves the artifact.
	URL string `json:"url"`
	// Revision is the source revision, e.g. main@sha1:<commit> or
	// v1.0.0@sha256:<digest>.
	Revision string `json:"revision"`
	// Digest is the digest of the file, sha256:<hex>.
	Digest string `json:"digest"`
	// Size is the size of the file in bytes.
	Size int64 `json:"size"`
	// LastUpdateTime is when the file was last written or confirmed.
	LastUpdateTime time.Time `json:"lastUpdateTime"`
	// Metadata holds extra annotations, such as OCI manifest annotations.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Object identifies the owner of artifacts: a source object such as
// GitRepository/flux-system/podinfo. The store keeps each object's
// artifacts in its own directory.
type Object struct {
	Kind, Namespace, Name string
}

// String returns Kind/namespace/name.
func (o Object) String() string { return o.Kind + "/" + o.Namespace + "/" + o.Name }

// dir returns the object's directory relative to the store root, with
// the kind lower-cased as Flux does.
func (o Object) dir() (string, error) {
	for _, s := range []string{o.Kind, o.Namespace, o.Name} {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\`) || strings.HasPrefix(s, ".") {
			return "", fmt.Errorf("%w: object %s", ErrInvalidObject, o)
		}
	}
	return path.Join(strings.ToLower(o.Kind), o.Namespace, o.Name), nil
}

// SHA256Hex returns the SHA-256 of b in lower-case hex, the form of the
// <hex> in an Artifact's "sha256:<hex>" Digest.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
