package bootstrap

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// apiServerEndpoints reads the kubernetes EndpointSlices in the default
// namespace and returns the API server URLs they list, sorted. Remember them
// (for example in the data directory) and pass them as
// DiscoverOptions.Fallbacks on the next start.
func apiServerEndpoints(ctx context.Context, c client.Reader) ([]string, error) {
	var slices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &slices, client.InNamespace("default"),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return nil, fmt.Errorf("listing EndpointSlices default/kubernetes: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range slices.Items {
		for _, p := range s.Ports {
			if p.Port == nil || (p.Name != nil && *p.Name != "https") {
				continue
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && !*e.Conditions.Ready {
					continue
				}
				for _, a := range e.Addresses {
					u := "https://" + net.JoinHostPort(a, strconv.Itoa(int(*p.Port)))
					if !seen[u] {
						seen[u] = true
						out = append(out, u)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
