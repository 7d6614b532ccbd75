// Command image builds cozy-aio's multi-arch container image without
// Docker (see internal/image) and pushes it or writes an OCI layout.
// `make image` runs it:
//
//	go run ./hack/image -version v0.1.0 -revision $(git rev-parse HEAD) -image ghcr.io/cozystack/cozy-aio:v0.1.0
//	go run ./hack/image -layout bin/image
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/cozystack/cozy-aio/internal/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		version   = flag.String("version", "dev", "version stamped into the binary and the label org.opencontainers.image.version")
		revision  = flag.String("revision", "", "source revision (label org.opencontainers.image.revision)")
		source    = flag.String("source", image.DefaultSource, "source repository (label org.opencontainers.image.source)")
		platforms = flag.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
		ref       = flag.String("image", "", "reference to push to; empty writes -layout only")
		layoutDir = flag.String("layout", "", "directory to write an OCI image layout to")
		insecure  = flag.Bool("insecure", false, "plain HTTP to the registry")
		caCerts   = flag.String("ca-certs", defaultCACerts, "PEM roots copied into the image for HTTPS sources (empty: none)")
		outDir    = flag.String("bin-dir", "bin", "where the per-platform binaries are built")
		epoch     = flag.Int64("created", sourceDateEpoch(), "creation time, Unix seconds (default $SOURCE_DATE_EPOCH, else 0)")
	)
	flag.Parse()
	if *ref == "" && *layoutDir == "" {
		return errors.New("give -image REF or -layout DIR")
	}
	var plats []image.Platform
	for _, s := range strings.Split(*platforms, ",") {
		p, err := image.ParsePlatform(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		plats = append(plats, p)
	}
	opts := image.Options{Version: *version, Revision: *revision, Source: *source, Created: time.Unix(*epoch, 0)}
	if *caCerts != "" {
		b, err := os.ReadFile(*caCerts)
		switch {
		case err == nil:
			opts.CACerts = b
		case errors.Is(err, os.ErrNotExist) && *caCerts == defaultCACerts:
			// A build host without the Debian bundle (macOS): the image
			// then verifies HTTPS sources only with roots mounted at
			// /etc/ssl/certs.
			fmt.Fprintf(os.Stderr, "image: warning: no %s on this host; the image holds no CA roots (-ca-certs FILE)\n", defaultCACerts)
		default:
			return fmt.Errorf("-ca-certs: %w", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bins, err := image.BuildBinaries(ctx, image.BuildOptions{Platforms: plats, Version: *version, OutDir: *outDir})
	if err != nil {
		return err
	}
	opts.Binaries = bins
	idx, err := image.Index(opts)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if *layoutDir != "" {
		if err := image.WriteLayout(*layoutDir, idx, *version); err != nil {
			return err
		}
		fmt.Printf("wrote OCI layout %s (index %s)\n", *layoutDir, digest)
	}
	if *ref != "" {
		if err := image.Push(ctx, idx, *ref, image.PushOptions{Insecure: *insecure}); err != nil {
			return err
		}
		fmt.Printf("pushed %s@%s\n", *ref, digest)
	}
	return nil
}

// defaultCACerts is the Debian and Alpine bundle of the build host.
const defaultCACerts = "/etc/ssl/certs/ca-certificates.crt"

func sourceDateEpoch() int64 {
	var n int64
	fmt.Sscan(os.Getenv("SOURCE_DATE_EPOCH"), &n)
	return n
}
