#!/usr/bin/env bash
# Makes sure Chromium is there for the status page's browser tests
# (internal/statuspage): Debian's chromium package, installed with apt-get
# when missing and run as root (CI is). Elsewhere it says what to run; the
# tests then skip, or fail when CI is set.
set -euo pipefail
for name in "${CHROMIUM:-}" chromium chromium-browser google-chrome; do
	if [ -n "$name" ] && command -v "$name" >/dev/null 2>&1; then
		exit 0
	fi
done
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "installing Debian's chromium for the browser tests..."
	log=$(mktemp)
	if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; } >"$log" 2>&1; then
		tail -20 "$log"
		echo "could not install chromium (see above); the browser tests will fail in CI" >&2
		exit 1
	fi
	rm -f "$log"
	exit 0
fi
echo "no Chromium: the status page's browser tests need it; run: sudo apt-get install chromium (or set CHROMIUM)" >&2
