// Package generator is the engine's room for the ArtifactGenerator: it
// composes ExternalArtifacts from several sources as Flux's source-watcher
// does, shares the extracted source trees between generators, and rebuilds
// an output the artifact store lacks (Rebuild). It receives what it uses
// in Deps and imports no other family of kinds.
package generator
