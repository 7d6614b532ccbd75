package generate

import (
	"io/fs"
	"path"
	"testing"
	"testing/fstest"
)

// TestMemoryTreeFS checks the tree as the fs.FS the archiver reads.
func TestMemoryTreeFS(t *testing.T) {
	m := newMemoryTree()
	files := map[string]fs.FileMode{"a/b/c.yaml": 0o644, "a/run.sh": 0o755, "top.yaml": 0o644, "a/b/d/e.txt": 0o644}
	for name, mode := range files {
		if err := m.MkdirAll(path.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := m.WriteFile(name, []byte(name), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.MkdirAll("empty/dir", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(m, "a/b/c.yaml", "a/run.sh", "top.yaml", "a/b/d/e.txt", "empty/dir"); err != nil {
		t.Fatal(err)
	}
}
