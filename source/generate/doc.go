// Package generate composes new artifacts from several sources with the
// semantics of Flux source-watcher's ArtifactGenerator.
//
// Each source is an alias for the extracted tree of an artifact. Copy
// operations run in order, from "@alias/<glob>" to "@artifact/<path>":
//
//   - a file goes to the destination path, or into it when the
//     destination ends with "/" or is already a directory of the output;
//   - "dir/" (or "dir") copies the directory itself, as cp -r does into a
//     destination that exists: "@src/dir" → "@artifact/out" gives
//     out/dir/…; the source root "@src/" copies its contents;
//   - "dir/**" copies the directory's contents: out/…;
//   - glob patterns ("*", "?", "[…]", "**") copy every match, keeping its
//     path relative to the pattern's non-glob prefix;
//   - exclude patterns match paths relative to the source root or to that
//     prefix; a pattern without "/" matches a name at any depth; a glob
//     whose every match is excluded is an error, like one matching nothing.
//
// Strategies: Overwrite (the default) replaces files; Merge deep-merges
// YAML maps into an existing file, with lists replaced, as Helm merges
// values files; Extract unpacks .tgz/.tar.gz files into the destination.
//
//	budget := generate.NewBudget(256 << 20) // shared by every build
//	art, res, err := generate.Build(ctx, store, obj, map[string]generate.Source{
//		"chart":  {FS: chartRoot.FS(), Revision: "6.5.0@sha256:…"},
//		"values": {FS: repoRoot.FS(), Revision: "main@sha1:…"},
//	}, generate.Spec{
//		Revision: "@chart",
//		Copy: []generate.Copy{
//			{From: "@chart/podinfo/**", To: "@artifact/"},
//			{From: "@values/prod.yaml", To: "@artifact/values.yaml", Strategy: generate.Merge},
//		},
//	}, generate.BuildOptions{Memory: budget})
//
// Build holds an output in memory within a Budget that all builds share,
// and composes one that outgrows what is left in a temporary directory,
// as source-watcher composes every output: the same artifact, slower. An
// output's files are capped (BuildOptions.MaxBytes) wherever they are.
//
// Without Spec.Revision the revision is "latest@sha256:<digest>", the
// digest of the deterministic output archive. Errors wrap ErrUnknownAlias,
// ErrNoMatch, ErrInvalidPath, ErrNotArchive and ErrMerge inside a
// *CopyError naming the operation.
package generate
