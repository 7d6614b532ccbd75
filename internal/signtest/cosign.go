// Package signtest signs OCI artifacts in tests with the cosign CLI's own
// code, offline, as a user's pipeline signs them. It is a package of its
// own so that only the tests that sign link the cosign CLI.
package signtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	coptions "github.com/sigstore/cosign/v3/cmd/cosign/cli/options"
	"github.com/sigstore/cosign/v3/cmd/cosign/cli/sign"
	"github.com/sigstore/cosign/v3/pkg/cosign"
)

// CosignKey is a key pair as `cosign generate-key-pair` writes it.
type CosignKey struct {
	path string // the encrypted private key
	// Public is the PEM public key, as cosign.pub holds it.
	Public []byte
}

func password(bool) ([]byte, error) { return []byte("pw"), nil }

// NewCosignKey makes a key pair.
func NewCosignKey(t testing.TB) CosignKey {
	t.Helper()
	keys, err := cosign.GenerateKeyPair(password)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cosign.key")
	if err := os.WriteFile(path, keys.PrivateBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return CosignKey{path: path, Public: keys.PublicBytes}
}

// Sign signs ref ("host/repo@sha256:<hex>" or a tag) as `cosign sign
// --key` does, without a transparency log, on a plain-HTTP registry: the
// v2 signature tag, or with bundle a v3 bundle as an OCI referrer. login
// is the registry's username and password, if it has any.
func (k CosignKey) Sign(t testing.TB, ref string, bundle bool, login ...string) {
	t.Helper()
	reg := coptions.RegistryOptions{AllowInsecure: true, AllowHTTPRegistry: true}
	if len(login) == 2 {
		reg.AuthConfig = authn.AuthConfig{Username: login[0], Password: login[1]}
	}
	err := sign.SignCmd(context.Background(), &coptions.RootOptions{Timeout: time.Minute},
		coptions.KeyOpts{KeyRef: k.path, PassFunc: password},
		coptions.SignOptions{
			Upload: true, SkipConfirmation: true, TlogUpload: false, NewBundleFormat: bundle,
			Registry: reg,
		}, []string{ref})
	if err != nil {
		t.Fatalf("signing %s: %v", ref, err)
	}
}
