// Package source owns artifacts: the Artifact type, a content-addressed store
// with atomic writes, retention and garbage collection, deterministic tar.gz
// archives, safe extraction, and an HTTP server that serves the store with
// Flux's URL layout on loopback.
//
// Fetchers live in subpackages named for what they wrap: source/git and
// source/oci. source/generate composes new artifacts from several sources.
// Nothing here knows about Kustomizations or Helm.
package source
