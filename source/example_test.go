package source_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cozystack/cozy-aio/source"
)

// A fetcher stores a directory as an artifact; a consumer in the same
// process extracts it, verified against its digest.
func Example() {
	ctx := context.Background()
	tmp, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(tmp)

	src := filepath.Join(tmp, "src")
	os.MkdirAll(filepath.Join(src, "deploy"), 0o755)
	os.WriteFile(filepath.Join(src, "deploy", "app.yaml"), []byte("kind: ConfigMap\n"), 0o644)
	os.WriteFile(filepath.Join(src, "notes.md"), []byte("not shipped\n"), 0o644)
	os.WriteFile(filepath.Join(src, ".sourceignore"), []byte("*.md\n"), 0o644)

	store, err := source.NewStore(filepath.Join(tmp, "store"), source.StoreOptions{BaseURL: "http://source.local"})
	if err != nil {
		panic(err)
	}
	obj := source.Object{Kind: "GitRepository", Namespace: "flux-system", Name: "app"}
	a, err := store.Archive(ctx, obj, src, "main@sha1:0123456789abcdef0123456789abcdef01234567", source.ArchiveOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(a.Revision)
	fmt.Println(filepath.Dir(a.Path))

	out := filepath.Join(tmp, "out")
	if err := store.Extract(ctx, a, out, source.ExtractOptions{}); err != nil {
		panic(err)
	}
	b, _ := os.ReadFile(filepath.Join(out, "deploy", "app.yaml"))
	fmt.Print(string(b))
	_, err = os.Stat(filepath.Join(out, "notes.md"))
	fmt.Println("notes.md shipped:", err == nil)
	// Output:
	// main@sha1:0123456789abcdef0123456789abcdef01234567
	// gitrepository/flux-system/app
	// kind: ConfigMap
	// notes.md shipped: false
}
