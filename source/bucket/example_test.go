package bucket_test

import (
	"fmt"

	"github.com/cozystack/cozy-aio/source/bucket"
)

// The revision of a bucket is Flux's: the digest of its object keys and
// ETags, after the root .sourceignore and spec.ignore.
func ExampleNewIndex() {
	listed := []bucket.Listed{
		{Key: ".sourceignore", ETag: "0f0e"},
		{Key: "a.yaml", ETag: "0cc175b9c0f1b6a831c399e269772661"},
		{Key: "b/c.yaml", ETag: "92eb5ffee6ae2fec3ad71c777531578f"},
		{Key: "b/README.md", ETag: "1f2e"},
	}
	ix, err := bucket.NewIndex(listed, []byte("*.md\n"), nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(ix.Keys())
	fmt.Println(ix.Revision())
	// Output:
	// [a.yaml b/c.yaml]
	// sha256:4012d75df16c72d0555d2ac3d22c48dc034b4f9aaf7d989771fb0f10e5005f60
}
