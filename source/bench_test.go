package source_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cozystack/cozy-aio/source"
)

// benchTree writes n files of about size bytes each: YAML-like text with
// random tokens, so that gzip has realistic work to do.
func benchTree(b *testing.B, n, size int) (string, int64) {
	b.Helper()
	dir := b.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	var total int64
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%05d.yaml", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		buf := make([]byte, 0, size)
		for len(buf) < size {
			buf = fmt.Appendf(buf, "key%d: value-%x\n", rng.IntN(1000), rng.Uint64())
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(len(buf))
	}
	return dir, total
}

// BenchmarkArchive measures deterministic tar.gz build throughput over the
// input bytes (MB/s in the output).
func BenchmarkArchive(b *testing.B) {
	for _, tc := range []struct{ n, size int }{{2000, 4 << 10}, {100, 256 << 10}} {
		b.Run(fmt.Sprintf("files=%d/size=%dKiB", tc.n, tc.size>>10), func(b *testing.B) {
			dir, total := benchTree(b, tc.n, tc.size)
			b.SetBytes(total)
			b.ResetTimer()
			for b.Loop() {
				if err := source.WriteArchive(context.Background(), io.Discard, dir, source.ArchiveOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The peer: GNU tar piped to gzip at its default level, same tree.
		b.Run(fmt.Sprintf("tar-czf/files=%d/size=%dKiB", tc.n, tc.size>>10), func(b *testing.B) {
			if _, err := exec.LookPath("tar"); err != nil {
				b.Skip("tar not installed")
			}
			dir, total := benchTree(b, tc.n, tc.size)
			b.SetBytes(total)
			b.ResetTimer()
			for b.Loop() {
				cmd := exec.Command("tar", "-czf", "-", "-C", dir, ".")
				cmd.Stdout = io.Discard
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExtract measures safe extraction throughput over the unpacked
// bytes.
func BenchmarkExtract(b *testing.B) {
	dir, total := benchTree(b, 2000, 4<<10)
	st, _ := source.NewStore(b.TempDir(), source.StoreOptions{})
	a, err := st.Archive(context.Background(), source.Object{Kind: "K", Namespace: "n", Name: "x"}, dir, "r", source.ArchiveOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(total)
	b.ResetTimer()
	for b.Loop() {
		out := b.TempDir()
		if err := st.Extract(context.Background(), a, out, source.ExtractOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
