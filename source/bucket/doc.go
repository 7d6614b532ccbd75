// Package bucket fetches S3-compatible buckets (Flux's Bucket, provider
// generic) with minio-go into the artifact store.
//
// A fetch lists the bucket first and stops there when nothing changed: the
// object keys under the prefix, less those that the bucket's root
// .sourceignore and the caller's patterns exclude, with their ETags form an
// Index, and the revision is the digest of that index exactly as Flux
// computes it ("sha256:<hex>"). Only when the revision differs from the last
// one stored are objects downloaded, and then only those whose content the
// previous artifact does not already hold under the same key (an object
// whose ETag is the MD5 of the stored file is copied from it):
//
//	res, err := bucket.Fetch(ctx, store, obj, "manifests", bucket.Options{
//		Server:       bucket.Server{Endpoint: "s3.example.com", AccessKey: ak, SecretKey: sk},
//		Prefix:       "apps/",
//		LastRevision: previous.Revision,
//		Reuse:        previous,
//	})
//	// res.Revision is "sha256:<index digest>"; res.Unchanged tells whether
//	// res.Artifact is new; res.Downloaded and res.Reused count objects.
//
// A bucket keeps no history, so FetchRevision can rebuild the artifact of a
// revision only while the bucket still holds the objects of that revision;
// otherwise it fails with ErrRevisionGone.
//
// Object keys become paths in the artifact. A key that is not a clean
// relative path (leading "/", "." or ".." elements, empty elements) fails
// the fetch with ErrUnsafeKey: nothing is written outside the work
// directory. Errors wrap source.ErrUnreachable, source.ErrAuth,
// source.ErrRefNotFound (the bucket does not exist) and source.ErrTooLarge.
package bucket
