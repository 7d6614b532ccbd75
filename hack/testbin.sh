#!/usr/bin/env bash
# testbin.sh builds the test control plane from Go modules into a cache:
#   $HOME/.cache/cozy-aio/testbin/<kube version>/{kube-apiserver,etcd,...}
# No binary is downloaded: everything comes from the Go module proxy.
# Usage: hack/testbin.sh [all|envtest|cluster|s3]   (default: envtest)
#   envtest: kube-apiserver and etcd
#   cluster: envtest plus kube-controller-manager, kube-scheduler and kwok
#   s3:      envtest plus weed, the SeaweedFS server the Bucket tests use as
#            their S3-compatible endpoint (module pinned in hack/testbin/weed;
#            its first build takes about 12 CPU-minutes: 6-7 minutes on 2 idle
#            cores, 38 minutes measured on 2 cores shared with other builds)
#   all:     all of the above
# Prints the binary directory on its last line.
set -euo pipefail
# The project builds with Go 1.27.3, fetched by the go command (machines start on 1.26).
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"

KUBE_VERSION=v1.37.1
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0

here=$(cd "$(dirname "$0")" && pwd)
dir=${COZY_TESTBIN_DIR:-${HOME}/.cache/cozy-aio/testbin/${KUBE_VERSION}}
what=${1:-envtest}
mkdir -p "$dir"

log() { printf '[testbin] %s\n' "$*" >&2; }

minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=${minor} \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=${KUBE_VERSION} \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=${minor}"

build() { # name moddir pkg [ldflags]
  local name=$1 moddir=$2 pkg=$3 flags=${4:-$ldflags}
  if [ -x "$dir/$name" ]; then
    log "$name: cached at $dir/$name"
    return
  fi
  log "$name: building from Go modules (first build takes minutes on 2 cores)..."
  local start=$SECONDS
  (cd "$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$dir/$name.tmp" "$pkg")
  mv "$dir/$name.tmp" "$dir/$name"
  log "$name: built in $((SECONDS - start))s"
}

build etcd "$here/testbin/etcd" .
build kube-apiserver "$here/testbin" ./kube-apiserver
if [ "$what" = cluster ] || [ "$what" = all ]; then
  build kube-controller-manager "$here/testbin" ./kube-controller-manager
  build kube-scheduler "$here/testbin" ./kube-scheduler
  if [ ! -x "$dir/kwok" ]; then
    log "kwok: building sigs.k8s.io/kwok ${KWOK_VERSION}..."
    start=$SECONDS
    GOBIN="$dir" CGO_ENABLED=0 go install -trimpath "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
    log "kwok: built in $((SECONDS - start))s"
  fi
fi
if [ "$what" = s3 ] || [ "$what" = all ]; then
  # The cached weed is rebuilt when hack/testbin/weed pins another version.
  weed_version=$(awk '$1 == "github.com/seaweedfs/seaweedfs" {print $2}' "$here/testbin/weed/go.mod")
  if [ "$(cat "$dir/weed.version" 2>/dev/null)" != "$weed_version" ]; then
    rm -f "$dir/weed"
  fi
  build weed "$here/testbin/weed" github.com/seaweedfs/seaweedfs/weed "-s -w"
  echo "$weed_version" >"$dir/weed.version"
fi
echo "$dir"
