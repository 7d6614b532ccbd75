// Package source owns artifacts: the Artifact type, a content-addressed store
// with atomic writes, retention and garbage collection, deterministic tar.gz
// archives, safe extraction, and an HTTP server that serves the store with
// Flux's URL layout on loopback.
//
// Fetchers live in subpackages named for what they wrap: source/git,
// source/oci and source/bucket (S3). source/generate composes new artifacts from several sources.
// Nothing here knows about Kustomizations or HelmReleases; ChartName and
// Repack know where a Helm chart keeps its Chart.yaml, to re-pack a chart
// copied to an artifact's root the way Helm loads it.
//
// A typical cycle, under the object's lock:
//
//	store, _ := source.NewStore("/var/lib/cozy-aio/artifacts", source.StoreOptions{})
//	obj := source.Object{Kind: "GitRepository", Namespace: "flux-system", Name: "app"}
//	a, err := store.Archive(ctx, obj, checkoutDir, "main@sha1:…", source.ArchiveOptions{})
//	// record a in the object's status, then apply retention:
//	_, err = store.GC(ctx, obj, a)
//
// Trees that are not on disk (an in-memory Git work tree) go through
// Store.ArchiveFS and WriteArchiveFS. Consumers in the process read an
// artifact with Store.Extract, which verifies its digest.
//
// and, once for the process:
//
//	srv, _ := source.NewServer(store, source.ServerOptions{}) // 127.0.0.1:9090
//	go srv.Start(ctx)
//
// Errors that callers branch on are sentinels (ErrUnreachable, ErrAuth,
// ErrRefNotFound, ErrNoSemverMatch, ErrDigestMismatch, and the archive
// errors ErrPathTraversal, ErrAbsolutePath, ErrSymlinkEscape, ErrDeviceFile,
// ErrTooLarge inside an *ArchiveError); the fetchers wrap the same ones
// with Classify, which knows the network failures every fetcher meets and
// asks the fetcher about the errors of its own protocol.
package source
