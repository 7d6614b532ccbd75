// Package status summarises what a cozy-aio node is doing, for the
// operator: the bootstrap phase, Ready out of total units per Flux kind,
// the units that are not Ready with their messages, and the Helm shards'
// loads and queue depths. Units come from the API server and the rest from
// the process's /metrics. `cozy-aio status` prints it, and the demo prints
// its progress lines from the same functions.
//
//	s, err := status.Read(ctx, status.Options{Reader: c, MetricsAddr: "127.0.0.1:9440"})
//	if err == nil {
//		_ = s.WriteText(os.Stdout)
//	}
package status
