package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cozystack/cozy-aio/plan"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configures Read.
type Options struct {
	// Reader lists the Flux objects; its scheme must hold the Flux types.
	// Required.
	Reader client.Reader
	// MetricsAddr is host:port of the process's /metrics (its
	// --health-addr). Empty: the summary has no phase or shards.
	MetricsAddr string
	// MaxNotReady caps the units listed as not Ready, so that the summary
	// fits a screen; the count is always complete. Default: 20; negative:
	// no cap.
	MaxNotReady int
}

// Summary is one node's state at a glance.
type Summary struct {
	// Phase is the bootstrap phase (network or all); empty when /metrics
	// did not answer or the process runs no bootstrap.
	Phase string `json:"phase,omitempty"`
	// Leader is set when the process leads (cozy_aio_leader).
	Leader bool `json:"leader"`
	// Kinds are Ready out of total units per kind.
	Kinds []Count `json:"kinds"`
	// NotReady are the units that are not Ready (at most
	// Options.MaxNotReady), and NotReadyTotal how many there are.
	NotReady      []Unit `json:"notReady"`
	NotReadyTotal int    `json:"notReadyTotal"`
	// Shards are the Helm shards' loads and queue depths.
	Shards []Shard `json:"shards"`
	// Clusters are the remote clusters units deploy to (spec.kubeConfig),
	// sorted by name.
	Clusters []RemoteCluster `json:"clusters,omitempty"`
	// MetricsError says why /metrics was not read.
	MetricsError string `json:"metricsError,omitempty"`
	// Plans are the units' last plans (docs/upgrade-preview.md), held
	// ones first; PlansError says why they were not read.
	Plans      []Plan `json:"plans,omitempty"`
	PlansError string `json:"plansError,omitempty"`
	// Page is the status page's overview (GET /api/v1/overview,
	// docs/status-page.md), when its address was given; PageError says
	// why it was not read.
	Page      json.RawMessage `json:"page,omitempty"`
	PageError string          `json:"pageError,omitempty"`
}

// Read lists the units through the API server and scrapes /metrics. An
// unreachable /metrics is not an error: the summary says so in
// MetricsError and still counts the units.
func Read(ctx context.Context, opts Options) (*Summary, error) {
	if opts.MaxNotReady == 0 {
		opts.MaxNotReady = 20
	}
	units, err := ListUnits(ctx, opts.Reader)
	if err != nil {
		return nil, err
	}
	s := &Summary{Kinds: CountUnits(units), NotReady: []Unit{}, Shards: []Shard{}}
	for _, u := range units {
		if u.Ready {
			continue
		}
		s.NotReadyTotal++
		if opts.MaxNotReady < 0 || len(s.NotReady) < opts.MaxNotReady {
			s.NotReady = append(s.NotReady, u)
		}
	}
	if opts.MetricsAddr == "" {
		return s, nil
	}
	m, err := Scrape(ctx, opts.MetricsAddr)
	if err != nil {
		s.MetricsError = err.Error()
		return s, nil
	}
	s.Phase, s.Leader = m.Phase, m.Leader
	if m.Shards != nil {
		s.Shards = m.Shards
	}
	s.Clusters = RemoteClusters(units, m.Remote, time.Now())
	if s.Plans, err = ReadPlans(ctx, opts.MetricsAddr); err != nil {
		s.PlansError = err.Error()
	}
	slices.SortStableFunc(s.Plans, func(a, b Plan) int {
		switch {
		case a.Held == b.Held:
			return 0
		case a.Held:
			return -1
		}
		return 1
	})
	return s, nil
}

// RemoteCluster is one remote cluster: its units and what the process's
// clients saw of it.
type RemoteCluster struct {
	// Name is the Secret or ConfigMap of the units' spec.kubeConfig.
	Name  string `json:"name"`
	Ready int    `json:"ready"`
	Total int    `json:"total"`
	// Unreachable is set when the process's requests to the cluster fail
	// and it has not answered for a minute (or ever).
	Unreachable bool          `json:"unreachable"`
	Metrics     RemoteMetrics `json:"metrics"`
}

// unreachableAfter is how long a remote cluster with errors may go without
// an answer before the summary calls it unreachable.
const unreachableAfter = time.Minute

// RemoteClusters gathers the units' remote clusters and what the
// process's metrics say of them, sorted by name.
func RemoteClusters(units []Unit, metrics map[string]*RemoteMetrics, now time.Time) []RemoteCluster {
	by := map[string]*RemoteCluster{}
	at := func(name string) *RemoteCluster {
		if by[name] == nil {
			by[name] = &RemoteCluster{Name: name}
		}
		return by[name]
	}
	for _, u := range units {
		if u.Cluster == "" {
			continue
		}
		c := at(u.Cluster)
		c.Total++
		if u.Ready {
			c.Ready++
		}
	}
	for name, m := range metrics {
		c := at(name)
		c.Metrics = *m
		c.Unreachable = m.Errors > 0 && (m.LastContact.IsZero() || now.Sub(m.LastContact) > unreachableAfter)
	}
	out := make([]RemoteCluster, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// WriteText prints the summary for a terminal.
func (s *Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	phase := s.Phase
	if phase == "" {
		phase = "unknown"
	}
	fmt.Fprintf(&b, "phase: %s   leader: %t\n", phase, s.Leader)
	if s.MetricsError != "" {
		fmt.Fprintf(&b, "metrics: %s\n", s.MetricsError)
	}
	fmt.Fprintf(&b, "ready:%s\n", ReadyLine(s.Kinds))
	if len(s.Shards) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SHARD\tOWNED\tLOAD\tTENANTS\tQUEUED\tWAITING\tRUNNING")
		for _, sh := range s.Shards {
			fmt.Fprintf(tw, "%d\t%t\t%d\t%d\t%d\t%d\t%d\n", sh.ID, sh.Owned, sh.Load, sh.Tenants, sh.Queued, sh.Waiting, sh.Running)
		}
		tw.Flush()
	}
	if len(s.Clusters) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "REMOTE CLUSTER\tREADY\tREACHABLE\tREQUESTS\tERRORS")
		for _, c := range s.Clusters {
			fmt.Fprintf(tw, "%s\t%d/%d\t%t\t%d\t%d\n", c.Name, c.Ready, c.Total, !c.Unreachable, c.Metrics.Requests, c.Metrics.Errors)
		}
		tw.Flush()
	}
	if s.PlansError != "" {
		fmt.Fprintf(&b, "\nplans: %s\n", s.PlansError)
	}
	if len(s.Plans) > 0 {
		held := 0
		for _, p := range s.Plans {
			if p.Held {
				held++
			}
		}
		fmt.Fprintf(&b, "\nplans: %d kept, %d held for an approval (cozy-aio plan approve)\n", len(s.Plans), held)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tHELD\tPLANNED\tCHANGES\tRISKS")
		for i, p := range s.Plans {
			if i == 20 {
				fmt.Fprintf(tw, "... and %d more (-o json lists all)\n", len(s.Plans)-i)
				break
			}
			risks := 0
			if p.Plan != nil {
				for _, r := range p.Plan.Risks {
					if r.Code != plan.Hooks {
						risks++
					}
				}
			}
			summary := ""
			if p.Plan != nil {
				summary = p.Plan.Summary()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%s\t%d\n", p.Kind, p.Namespace, p.Name, p.Held, p.At.Format(time.RFC3339), summary, risks)
		}
		tw.Flush()
	}
	if s.NotReadyTotal > 0 {
		fmt.Fprintf(&b, "\nnot ready (%d):\n", s.NotReadyTotal)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tREASON\tMESSAGE")
		for _, u := range s.NotReady {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", u.Kind, u.Namespace, u.Name, u.Reason, oneLine(u.Message, 120))
		}
		tw.Flush()
		if n := s.NotReadyTotal - len(s.NotReady); n > 0 {
			fmt.Fprintf(&b, "... and %d more (-o json --max-not-ready -1 lists all)\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ReadyLine prints Ready/total per kind, leaving out the kinds without
// units but HelmRelease: " GitRepository 1/1 HelmRelease 3/5".
func ReadyLine(counts []Count) string {
	var b strings.Builder
	for _, c := range counts {
		if c.Total > 0 || c.Kind == "HelmRelease" {
			fmt.Fprintf(&b, " %s %d/%d", c.Kind, c.Ready, c.Total)
		}
	}
	return b.String()
}

// oneLine keeps a message on one line of at most n runes.
func oneLine(msg string, n int) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if r := []rune(msg); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return msg
}
