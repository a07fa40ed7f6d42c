#!/usr/bin/env bash
# Regenerates src/gen/ from proto/ (buf.gen.yaml holds the ts-proto options). Idempotent: the
# output depends only on the .proto files and the pinned tool versions, so CI can check
# `npm run gen && git diff --exit-code src/gen`.
set -euo pipefail
cd "$(dirname "$0")/.."
# buf is fetched on demand (pinned): its platform packages break `npm ci` lock checks when listed.
buf="npx --yes @bufbuild/buf@1.75.0"
$buf lint
$buf generate
