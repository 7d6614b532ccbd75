package verify

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	sourceoci "github.com/cozystack/cozy-aio/source/oci"
)

// ErrNoMatchingSignature means no signature of the artifact verified with
// any of the keys: it is unsigned, signed by another key, or its signature
// was made for other content.
var ErrNoMatchingSignature = errors.New("no matching signatures were found")

const (
	// signatureAnnotation holds a v2 signature's base64 signature of its
	// layer, the payload.
	signatureAnnotation = "dev.cosignproject.cosign/signature"
	// bundleMediaType prefixes the media types of Sigstore bundles.
	bundleMediaType = "application/vnd.dev.sigstore.bundle"
	// maxSignatureSize bounds a signature manifest, payload or bundle.
	maxSignatureSize = 4 << 20
)

// Cosign verifies that ref, a digest reference ("host/repo@sha256:<hex>"),
// carries a cosign signature made by one of publicKeys (PEM), reaching
// the registry as reg says. As source-controller, a cosign v3 bundle
// attached as an OCI referrer is verified when there is one, else the v2
// signature tag (sha256-<hex>.sig); the transparency log is not consulted
// for keyed signatures. A key that is not a PEM public key is an error of
// its own.
//
// It checks what cosign's library checks for a keyed signature (a
// bundle's DSSE envelope over an in-toto statement whose subject is ref's
// digest; a v2 signature over a simple-signing payload that names it),
// without linking cosign or sigstore-go: their clients and verifiers of
// Sigstore's online services (transparency logs, certificate timestamps,
// TUF), which a keyed verification never calls, made 4.6 MB of the
// binary. Unlike
// source-controller v1.10, and as the cosign CLI's verify does, the signed
// payload must name ref's digest: a signature copied from another
// manifest's signature tag is refused.
func Cosign(ctx context.Context, ref string, publicKeys [][]byte, reg sourceoci.Registry) error {
	repoURL, dgst, _ := strings.Cut(ref, "@")
	d, err := digest.Parse(dgst)
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	var verifiers []signature.Verifier
	for _, key := range publicKeys {
		pub, err := cryptoutils.UnmarshalPEMToPublicKey(key)
		if err != nil {
			return err
		}
		v, err := signature.LoadVerifier(pub, crypto.SHA256)
		if err != nil {
			return err
		}
		verifiers = append(verifiers, v)
	}
	repo, err := sourceoci.Repository(repoURL, reg)
	if err != nil {
		return err
	}
	if bundles := bundlesOf(ctx, repo, d); len(bundles) > 0 {
		for _, v := range verifiers {
			for _, b := range bundles {
				if verifyBundle(b, v, d) == nil {
					return nil
				}
			}
		}
	} else {
		for _, v := range verifiers {
			for _, s := range v2Signatures(ctx, repo, d) {
				if verifySimpleSigning(s, v, d) == nil {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("%w for '%s'", ErrNoMatchingSignature, ref)
}

// sigstoreBundle is the part of a Sigstore bundle (v0.3 and later, its
// protobuf JSON) that a keyed cosign signature of an image uses: a DSSE
// envelope.
type sigstoreBundle struct {
	MediaType    string `json:"mediaType"`
	DSSEEnvelope *struct {
		Payload     []byte `json:"payload"`
		PayloadType string `json:"payloadType"`
		Signatures  []struct {
			Sig []byte `json:"sig"`
		} `json:"signatures"`
	} `json:"dsseEnvelope"`
}

// bundlesOf returns the Sigstore bundles (v0.3 and later) attached to d
// as OCI referrers, through the referrers API or its tag fallback.
// Referrers that are no bundle are skipped, as cosign skips them.
func bundlesOf(ctx context.Context, repo *remote.Repository, d digest.Digest) []sigstoreBundle {
	subject, err := repo.Resolve(ctx, d.String())
	if err != nil {
		return nil
	}
	var found []ocispec.Descriptor
	if err := repo.Referrers(ctx, subject, "", func(refs []ocispec.Descriptor) error {
		found = append(found, refs...)
		return nil
	}); err != nil {
		return nil
	}
	var out []sigstoreBundle
	for _, r := range found {
		m, err := manifest(ctx, repo, r)
		if err != nil || len(m.Layers) != 1 || !strings.HasPrefix(m.Layers[0].MediaType, bundleMediaType) {
			continue
		}
		raw, err := blob(ctx, repo, m.Layers[0])
		if err != nil {
			continue
		}
		var b sigstoreBundle
		if err := json.Unmarshal(raw, &b); err != nil || !bundleVersionAtLeast03(b.MediaType) {
			continue
		}
		out = append(out, b)
	}
	return out
}

// bundleVersionAtLeast03 reports whether a bundle's media type
// ("application/vnd.dev.sigstore.bundle.v0.3+json") is v0.3 or later, the
// versions cosign v3 accepts.
func bundleVersionAtLeast03(mediaType string) bool {
	v, ok := strings.CutPrefix(mediaType, bundleMediaType+".v")
	if !ok {
		return false
	}
	v = strings.TrimSuffix(v, "+json")
	major, minor, _ := strings.Cut(v, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	return err1 == nil && err2 == nil && (ma > 0 || mi >= 3)
}

// intotoStatement is the part of an in-toto statement a signature
// verification reads: what it is about.
type intotoStatement struct {
	Type    string `json:"_type"`
	Subject []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
}

// verifyBundle verifies b with the key of v, as cosign verifies a keyed
// bundle without a transparency log: a signature of its DSSE envelope
// (over the envelope's pre-authentication encoding), whose in-toto
// statement has d among its subjects.
func verifyBundle(b sigstoreBundle, v signature.Verifier, d digest.Digest) error {
	env := b.DSSEEnvelope
	if env == nil {
		return errors.New("the bundle has no DSSE envelope")
	}
	if env.PayloadType != "application/vnd.in-toto+json" {
		return fmt.Errorf("the bundle's payload is %q, not an in-toto statement", env.PayloadType)
	}
	pae := fmt.Appendf(nil, "DSSEv1 %d %s %d ", len(env.PayloadType), env.PayloadType, len(env.Payload))
	pae = append(pae, env.Payload...)
	verified := false
	for _, sig := range env.Signatures {
		if v.VerifySignature(bytes.NewReader(sig.Sig), bytes.NewReader(pae)) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return errors.New("no signature of the bundle verifies with the key")
	}
	var st intotoStatement
	if err := json.Unmarshal(env.Payload, &st); err != nil {
		return err
	}
	for _, s := range st.Subject {
		if s.Digest[d.Algorithm().String()] == d.Encoded() {
			return nil
		}
	}
	return fmt.Errorf("the signed statement is not about %s", d)
}

// simpleSigning is a v2 signature: the signed payload and the signature.
type simpleSigning struct{ payload, signature []byte }

// v2Signatures reads the signatures of the tag cosign v2 attaches to d,
// sha256-<hex>.sig: one layer each, the payload, signed in an annotation.
func v2Signatures(ctx context.Context, repo *remote.Repository, d digest.Digest) []simpleSigning {
	desc, err := repo.Resolve(ctx, d.Algorithm().String()+"-"+d.Encoded()+".sig")
	if err != nil {
		return nil
	}
	m, err := manifest(ctx, repo, desc)
	if err != nil {
		return nil
	}
	var out []simpleSigning
	for _, l := range m.Layers {
		sig, err := base64.StdEncoding.DecodeString(l.Annotations[signatureAnnotation])
		if err != nil || len(sig) == 0 {
			continue
		}
		p, err := blob(ctx, repo, l)
		if err != nil {
			continue
		}
		out = append(out, simpleSigning{payload: p, signature: sig})
	}
	return out
}

// verifySimpleSigning verifies s with v and that its payload names d, as
// cosign's signature verification and its SimpleClaimVerifier do.
func verifySimpleSigning(s simpleSigning, v signature.Verifier, d digest.Digest) error {
	if err := v.VerifySignature(bytes.NewReader(s.signature), bytes.NewReader(s.payload)); err != nil {
		return err
	}
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(s.payload, &p); err != nil {
		return err
	}
	if p.Critical.Type != payload.CosignSignatureType || p.Critical.Image.DockerManifestDigest != d.String() {
		return fmt.Errorf("the signed payload names %q, not %s", p.Critical.Image.DockerManifestDigest, d)
	}
	return nil
}

func manifest(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor) (ocispec.Manifest, error) {
	var m ocispec.Manifest
	raw, err := blob(ctx, repo, desc)
	if err == nil {
		err = json.Unmarshal(raw, &m)
	}
	return m, err
}

// blob fetches what desc describes, verified against its digest, up to
// maxSignatureSize.
func blob(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor) ([]byte, error) {
	if desc.Size > maxSignatureSize {
		return nil, fmt.Errorf("%s: %d bytes, more than a signature may have", desc.Digest, desc.Size)
	}
	return content.FetchAll(ctx, repo, desc)
}
