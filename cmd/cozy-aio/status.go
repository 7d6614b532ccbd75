package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/status"
	"github.com/cozystack/cozy-aio/internal/statuspage"
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
	pageAddr := fs.String("page-addr", "127.0.0.1:9441", "host:port of the node's status page (its --status-addr), for the critical path and the why of each failure; empty: none")
	pagePrefix := fs.String("page-prefix", "", "the status page's --status-prefix")
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
	var ov *statuspage.Overview
	if *pageAddr != "" {
		ov = readPage(ctx, s, "http://"+*pageAddr+strings.TrimSuffix(*pagePrefix, "/")+statuspage.APIPath+"/overview")
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	if err := s.WriteText(stdout); err != nil {
		return err
	}
	return writePageText(stdout, ov)
}

// maxPageBody bounds the overview read from the status page.
const maxPageBody = 32 << 20

// readPage reads the status page's overview into s.Page (s.PageError
// when it does not answer: the page may be off) and decodes it.
func readPage(ctx context.Context, s *status.Summary, url string) *statuspage.Overview {
	fail := func(err error) *statuspage.Overview {
		s.PageError = err.Error()
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fail(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fail(fmt.Errorf("reading the status page: %w", err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPageBody))
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("reading %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b))))
	}
	var ov statuspage.Overview
	if err := json.Unmarshal(b, &ov); err != nil {
		return fail(fmt.Errorf("reading %s: %w", url, err))
	}
	s.Page = b
	return &ov
}

// writePageText prints what only the status page knows: the critical path
// and why each failure failed.
func writePageText(w io.Writer, ov *statuspage.Overview) error {
	if ov == nil {
		return nil
	}
	var b strings.Builder
	if len(ov.Bootstrap.CriticalPath) > 0 {
		b.WriteString("\ncritical path (the root cause first):\n  ")
		b.WriteString(statuspage.WhyLine(ov.Bootstrap.CriticalPath))
		b.WriteString("\n")
	}
	for i, f := range ov.Failures {
		if i == 0 {
			b.WriteString("\nwhy (the root cause first):\n")
		}
		if len(f.Why) > 1 {
			fmt.Fprintf(&b, "  %s\n", statuspage.WhyLine(f.Why))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
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
