// Package image builds cozy-aio's container image without Docker: the
// static binary on an empty base, one image per platform under one OCI
// index, assembled with go-containerregistry and pushed to a registry or
// written as an OCI layout. `make image` runs it through hack/image.
//
//	bins, _ := image.BuildBinaries(ctx, image.BuildOptions{Version: "v0.1.0"})
//	idx, _ := image.Index(image.Options{Binaries: bins, Version: "v0.1.0"})
//	_ = image.Push(ctx, idx, "ghcr.io/cozystack/cozy-aio:v0.1.0", image.PushOptions{})
//
// The package is internal and only hack/ and tests import it, so an
// embedder of cozy-aio never compiles go-containerregistry.
package image
