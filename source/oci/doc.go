// Package oci fetches OCI artifacts with oras-go v2 into the artifact store.
//
// A fetch resolves the reference to a manifest digest first and stops
// there when the revision equals the last one stored; otherwise it reads
// the manifest, verifies it against its digest, selects a layer by media
// type and either extracts it (then re-archives the tree) or copies it as
// is, verifying the layer digest on the way:
//
//	res, err := oci.Fetch(ctx, store, obj, "oci://ghcr.io/org/manifests", oci.Options{
//		Registry:     oci.Registry{DockerConfigJSON: secretData[".dockerconfigjson"]},
//		Ref:          oci.Ref{SemVer: ">=1.0.0"},
//		LastRevision: previous.Revision,
//	})
//	// res.Revision is "1.2.0@sha256:<manifest digest>".
//
// FetchRevision rebuilds the artifact of a revision Fetch returned earlier
// from the manifest digest it names, even after the tag has moved.
// ReadRevision returns the layer of a revision in memory instead of
// storing it (package apply/helm pulls charts so).
//
// This is the process's one OCI client: a Registry (credentials, plain
// HTTP, TLS, proxy) says how every verb reaches the registry, and the
// transport retries what oras-go deems transient.
//
// Revisions have Flux's format: "<tag>@sha256:<hex>" for a tag or a semver
// range and "sha256:<hex>" for a digest. Errors wrap source.ErrUnreachable,
// source.ErrAuth, source.ErrRefNotFound, source.ErrNoSemverMatch,
// source.ErrDigestMismatch and ErrLayerNotFound.
package oci
