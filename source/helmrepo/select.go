package helmrepo

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	repo "helm.sh/helm/v4/pkg/repo/v1"
)

// Errors of Select.
var (
	// ErrChartNotFound means the index has no chart of that name.
	ErrChartNotFound = errors.New("chart not found in the index")
	// ErrNoVersionMatch means no version of the chart is in the range.
	ErrNoVersionMatch = errors.New("no version matches")
)

// newestListed is how many versions a no-match message lists.
const newestListed = 5

// Select returns the version of chart that rng selects, as Flux does: an
// exact version string wins; otherwise the newest version matching the
// semver range ("" and "*" mean the newest stable one), versions equal
// but for build metadata ordered by their creation time. The error of a
// range that matches nothing lists the newest versions available.
func Select(idx *repo.IndexFile, chart, rng string) (*repo.ChartVersion, error) {
	cvs, ok := idx.Entries[chart]
	if !ok || len(cvs) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrChartNotFound, chart)
	}
	if rng != "" {
		for _, cv := range cvs {
			if cv.Version == rng {
				return cv, nil
			}
		}
	}
	if rng == "" {
		rng = "*"
	}
	c, err := semver.NewConstraint(rng)
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w: version %q is not a semver range: %w", chart, ErrNoVersionMatch, rng, err)
	}
	type candidate struct {
		v  *semver.Version
		cv *repo.ChartVersion
	}
	var all, matched []candidate
	for _, cv := range cvs {
		v, err := semver.NewVersion(cv.Version)
		if err != nil {
			continue
		}
		all = append(all, candidate{v, cv})
		if c.Check(v) {
			matched = append(matched, candidate{v, cv})
		}
	}
	newestFirst := func(a, b candidate) int {
		if d := b.v.Compare(a.v); d != 0 {
			return d
		}
		return b.cv.Created.Compare(a.cv.Created)
	}
	if len(matched) == 0 {
		slices.SortStableFunc(all, newestFirst)
		var names []string
		for i := 0; i < len(all) && i < newestListed; i++ {
			names = append(names, all[i].cv.Version)
		}
		return nil, fmt.Errorf("chart %q: %w %q (newest available: %s)", chart, ErrNoVersionMatch, rng, strings.Join(names, ", "))
	}
	slices.SortStableFunc(matched, newestFirst)
	return matched[0].cv, nil
}
