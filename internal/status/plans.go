package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/cozystack/cozy-aio/plan"
)

// Plan is a unit's last plan, as the process serves it on /plans/ (its
// last new desired state: a HelmRelease's install or upgrade, a
// Kustomization's new objects).
type Plan struct {
	Kind      string     `json:"kind"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Held      bool       `json:"held"`
	At        time.Time  `json:"at"`
	Plan      *plan.Plan `json:"plan"`
}

// maxPlansBody bounds what ReadPlans reads.
const maxPlansBody = 64 << 20

// ReadPlans reads the process's last plans from /plans/ on addr.
func ReadPlans(ctx context.Context, addr string) ([]Plan, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/plans/", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading plans: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("reading plans from %s: %s: %s", addr, resp.Status, b)
	}
	var out []Plan
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPlansBody)).Decode(&out); err != nil {
		return nil, fmt.Errorf("reading plans from %s: %w", addr, err)
	}
	return out, nil
}
