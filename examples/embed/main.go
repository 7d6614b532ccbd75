// Command embed shows how an operator embeds cozy-aio: it builds an engine
// on its own rest.Config and runs it next to its own controllers. Run it
// with a kubeconfig in $KUBECONFIG:
//
//	go run ./examples/embed
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cozystack/cozy-aio/engine"
)

func main() {
	ctrl.SetLogger(zap.New())
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cfg, os.TempDir()+"/cozy-aio-embed"); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

// run is all an embedder writes: options, New, Start.
func run(ctx context.Context, cfg *rest.Config, dataDir string) error {
	e, err := engine.New(cfg, engine.Options{
		DataDir:      dataDir,
		ArtifactAddr: "127.0.0.1:0", // any free loopback port
		InstallCRDs:  true,
		Shards:       0, // auto
	})
	if err != nil {
		return err
	}
	return e.Start(ctx)
}
