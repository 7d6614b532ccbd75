// Package artifacts is the engine's shared room for the artifacts units
// read: it resolves a source reference to the artifact in the store, and
// materialises one the store lacks (fetched from the URL status names, or
// rebuilt from upstream by the kind's own Rebuild, and checked against
// status.artifact.digest), one rebuild per artifact at a time. It imports
// no family of kinds: the facade hands it each kind's rebuild.
package artifacts
