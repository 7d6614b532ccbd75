package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/status"
)

// adminConf is the kubeconfig a control-plane node holds.
const adminConf = "/etc/kubernetes/admin.conf"

// statusCmd prints a node's summary: the phase, Ready/total per kind, the
// units that are not Ready and the Helm shards, from the API server and
// the process's /metrics.
func statusCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default $KUBECONFIG, ~/.kube/config, else "+adminConf+")")
	metricsAddr := fs.String("metrics-addr", "127.0.0.1:9440", "host:port of the node's /metrics (its --health-addr); empty: none")
	output := fs.String("o", "text", "text or json")
	maxNotReady := fs.Int("max-not-ready", 20, "units listed as not Ready (-1: all)")
	timeout := fs.Duration("timeout", 30*time.Second, "longest wait for the API server and /metrics")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output != "text" && *output != "json" {
		return fmt.Errorf("-o %q: want text or json", *output)
	}
	cfg, err := statusConfig(*kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: engine.NewScheme()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	s, err := status.Read(ctx, status.Options{Reader: c, MetricsAddr: *metricsAddr, MaxNotReady: *maxNotReady})
	if err != nil {
		return err
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	return s.WriteText(stdout)
}

// statusConfig loads the kubeconfig as kubectl does, falling back to the
// node's admin.conf.
func statusConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	if path == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if _, err := os.Stat(clientcmd.RecommendedHomeFile); err != nil {
			if _, err := os.Stat(adminConf); err == nil {
				rules.ExplicitPath = adminConf
			}
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return cfg, nil
}
