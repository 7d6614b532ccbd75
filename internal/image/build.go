package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildTags are the tags the shipped binary is built with. Leaving out
// kustomize's Go plugin loader keeps Go's plugin package, which makes the
// linker keep every symbol, out of the binary.
const BuildTags = "kustomize_disable_go_plugin_support"

// BuildOptions configures BuildBinaries.
type BuildOptions struct {
	// Platforms to build, as os/arch. Default: linux/amd64 and linux/arm64.
	Platforms []Platform
	// Version is stamped into the binary (main.version). Default: dev.
	Version string
	// ModuleDir is the root of the cozy-aio module. Default: the current
	// directory.
	ModuleDir string
	// OutDir receives one directory per platform (linux_amd64/cozy-aio).
	// Default: a new temporary directory.
	OutDir string
}

// Platform is an os/arch pair.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatform parses os/arch.
func ParsePlatform(s string) (Platform, error) {
	os, arch, ok := strings.Cut(s, "/")
	if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
		return Platform{}, fmt.Errorf("platform %q: want os/arch", s)
	}
	return Platform{OS: os, Arch: arch}, nil
}

// DefaultPlatforms are the platforms of the published image.
var DefaultPlatforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}}

// Binary is a built cozy-aio binary for one platform.
type Binary struct {
	Platform Platform
	Path     string
}

// BuildBinaries builds ./cmd/cozy-aio for each platform as shipped: static
// (CGO off), stripped (-s -w), with BuildTags and the version stamped.
// The Go build cache makes a rebuild of unchanged sources cost a link.
func BuildBinaries(ctx context.Context, opts BuildOptions) ([]Binary, error) {
	if len(opts.Platforms) == 0 {
		opts.Platforms = DefaultPlatforms
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.OutDir == "" {
		dir, err := os.MkdirTemp("", "cozy-aio-image-")
		if err != nil {
			return nil, err
		}
		opts.OutDir = dir
	}
	out := make([]Binary, 0, len(opts.Platforms))
	for _, p := range opts.Platforms {
		path, err := filepath.Abs(filepath.Join(opts.OutDir, p.OS+"_"+p.Arch, "cozy-aio"))
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", BuildTags,
			"-ldflags", "-s -w -X main.version="+opts.Version, "-o", path, "./cmd/cozy-aio")
		cmd.Dir = opts.ModuleDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building cozy-aio for %s: %w\n%s", p, err, b)
		}
		out = append(out, Binary{Platform: p, Path: path})
	}
	return out, nil
}
