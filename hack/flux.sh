#!/usr/bin/env bash
# Builds Flux's source-, helm- and kustomize-controller and the flux CLI (the versions of
# Flux 2.9 that cozy-aio's APIs match) from their module source on the Go
# module proxy into $FLUX_DIR (default ~/.cache/cozy-aio/flux), with their
# CRDs in $FLUX_DIR/crds, for `make switch-over`: the side-by-side runs
# need the real controllers. Nothing of Flux is kept in this repository.
# The module zips leave out the nested api module: its replace is dropped
# and the released api version required instead.
set -euo pipefail
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
FLUX_DIR=${FLUX_DIR:-$HOME/.cache/cozy-aio/flux}
mkdir -p "$FLUX_DIR/crds"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for m in source-controller@v1.9.2 helm-controller@v1.6.2 kustomize-controller@v1.9.6; do
  name=${m%@*} version=${m#*@}
  if [ -x "$FLUX_DIR/$name" ]; then
    echo "$name: $FLUX_DIR/$name (kept)"
    continue
  fi
  dir=$(go mod download -json "github.com/fluxcd/$m" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  cp -r "$dir" "$work/$name"
  chmod -R u+w "$work/$name"
  (
    cd "$work/$name"
    go mod edit -dropreplace "github.com/fluxcd/$name/api" -require "github.com/fluxcd/$name/api@$version"
    go mod tidy
    go build -o "$FLUX_DIR/$name" .
  )
  cp "$work/$name"/config/crd/bases/*.yaml "$FLUX_DIR/crds/"
  echo "$name: built $FLUX_DIR/$name"
done
# The flux CLI of Flux 2.9 (v2.9.5): its manifests/ directory, which the
# release build fills, gets a placeholder so that its embed pattern matches.
if [ -x "$FLUX_DIR/flux" ]; then
  echo "flux: $FLUX_DIR/flux (kept)"
else
  dir=$(go mod download -json github.com/fluxcd/flux2/v2@v2.9.5 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  cp -r "$dir" "$work/flux2"
  chmod -R u+w "$work/flux2"
  mkdir -p "$work/flux2/cmd/flux/manifests"
  echo "# placeholder" > "$work/flux2/cmd/flux/manifests/placeholder.yaml"
  (cd "$work/flux2" && go build -o "$FLUX_DIR/flux" ./cmd/flux)
  echo "flux: built $FLUX_DIR/flux"
fi
