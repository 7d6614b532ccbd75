package verify

import (
	"context"
	"crypto"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/oci"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	sourceoci "github.com/cozystack/cozy-aio/source/oci"
)

// ErrNoMatchingSignature means no signature of the artifact verified with
// any of the keys: it is unsigned, signed by another key, or its signature
// was made for other content.
var ErrNoMatchingSignature = errors.New("no matching signatures were found")

// Cosign verifies that ref, a digest reference ("host/repo@sha256:<hex>"),
// carries a cosign signature made by one of publicKeys (PEM), reaching
// the registry as reg says. As source-controller, a cosign v3 bundle
// attached as an OCI referrer is verified when there is one, else the v2
// signature tag (sha256-<hex>.sig); the transparency log is not consulted
// for keyed signatures. A key that is not a PEM public key is an error of
// its own.
//
// Unlike source-controller v1.10, and as the cosign CLI's verify does, the
// signed payload must name ref's digest: a signature copied from another
// manifest's signature tag is refused (cosign's claim verifiers).
func Cosign(ctx context.Context, ref string, publicKeys [][]byte, reg sourceoci.Registry) error {
	var nameOpts []name.Option
	if reg.PlainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nameOpts...)
	if err != nil {
		return err
	}
	tr, cred, err := reg.Client(r.Context().RegistryStr())
	if err != nil {
		return err
	}
	c := cred(r.Context().RegistryStr())
	registryOpts := []ociremote.Option{ociremote.WithRemoteOptions(
		remote.WithContext(ctx), remote.WithTransport(tr),
		remote.WithAuth(authn.FromConfig(authn.AuthConfig{
			Username: c.Username, Password: c.Password, IdentityToken: c.RefreshToken, RegistryToken: c.AccessToken,
		})),
	)}
	for _, key := range publicKeys {
		pub, err := cryptoutils.UnmarshalPEMToPublicKey(key)
		if err != nil {
			return err
		}
		verifier, err := signature.LoadVerifier(pub, crypto.SHA256)
		if err != nil {
			return err
		}
		co := &cosign.CheckOpts{RegistryClientOpts: registryOpts, SigVerifier: verifier, Offline: true, IgnoreTlog: true}
		if verified(ctx, r, co, nameOpts) {
			return nil
		}
	}
	return fmt.Errorf("%w for '%s'", ErrNoMatchingSignature, ref)
}

// verified reports whether ref has a signature co verifies: a v3 bundle
// when the registry holds one, else a v2 signature.
func verified(ctx context.Context, r name.Reference, co *cosign.CheckOpts, nameOpts []name.Option) bool {
	var sigs []oci.Signature
	bundles, _, err := cosign.GetBundles(ctx, r, co.RegistryClientOpts, nameOpts...)
	if len(bundles) == 0 || err != nil {
		co.ClaimVerifier = cosign.SimpleClaimVerifier
		sigs, _, err = cosign.VerifyImageSignatures(ctx, r, co)
	} else {
		co.NewBundleFormat = true
		co.ClaimVerifier = cosign.IntotoSubjectClaimVerifier
		sigs, _, err = cosign.VerifyImageAttestations(ctx, r, co, nameOpts...)
	}
	return err == nil && len(sigs) > 0
}
