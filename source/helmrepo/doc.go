// Package helmrepo is the client of Helm chart repositories served over
// HTTP(S): it fetches a repository's index.yaml into the artifact store,
// parses it with Helm's own index types, selects a chart version from a
// semver range as Flux does, and downloads and checks chart archives.
//
// A Client keeps what many objects share, within bounds: the parsed
// indexes of the last few index digests, the HTTP validators (ETag,
// Last-Modified) of each index so that an unchanged index is not
// downloaded again, and the chart archives downloaded lately, so that a
// hundred HelmCharts of one chart version download it once.
//
// Credentials are sent to the repository's own host only; a chart URL on
// another host gets them only with Options.PassCredentials, as in Helm and
// Flux.
//
//	c := helmrepo.NewClient(helmrepo.ClientOptions{})
//	res, err := c.FetchIndex(ctx, store, obj, "https://charts.example.com", helmrepo.Options{})
//	idx, err := c.Index(store, res.Artifact)
//	cv, err := helmrepo.Select(idx, "podinfo", ">=6.0.0")
//	data, err := c.DownloadChart(ctx, "https://charts.example.com", cv, helmrepo.Options{})
//
// OCI Helm repositories are not served here: source/oci is the one OCI
// client.
package helmrepo
