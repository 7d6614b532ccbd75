#!/usr/bin/env bash
# bench-alternate.sh A B [N]: runs `make bench-scale`'s job (200 tenants x 5
# releases, then the restart) N times (default 3) for each of two cozy-aio
# binaries, alternating A, B, A, B, ..., and prints each run's summary
# lines: time to every unit settled, peak RSS, CPU and API requests per
# release. Both runs of a pair see the same machine; the machine speed line
# says how fast it was. Build the binaries first, for example:
#   git worktree add /tmp/before <commit> && (cd /tmp/before && go build -o /tmp/cozy-aio-before ./cmd/cozy-aio)
#   go build -o /tmp/cozy-aio-after ./cmd/cozy-aio
#   hack/bench-alternate.sh /tmp/cozy-aio-before /tmp/cozy-aio-after 3
set -euo pipefail
a=$1 b=$2 n=${3:-3}
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
testbin=${COZY_TESTBIN_DIR:-$HOME/.cache/cozy-aio/testbin/v1.37.1}
cd "$(dirname "$0")/.."
go build -o bin/cozy-aio-demo ./examples/demo
for i in $(seq 1 "$n"); do
	for bin in "$a" "$b"; do
		log=$(mktemp)
		COZY_TESTBIN_DIR=$testbin DEMO_SCALE=1 DEMO_TENANTS=200 DEMO_RELEASES=5 DEMO_RESTART=1 \
			bin/cozy-aio-demo -cozy-aio "$bin" -timeout 40m >"$log" 2>&1 || { echo "run $i $bin failed: $log"; exit 1; }
		echo "== run $i: $bin"
		grep -E "^cozy-aio: .* every unit settled|^cozy-aio API requests|^machine speed" "$log" | head -3
		rm -f "$log"
	done
done
