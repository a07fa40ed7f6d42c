#!/usr/bin/env bash
# Regenerates src/gen/ from proto/ (buf.gen.yaml holds the ts-proto options). Idempotent: the
# output depends only on the .proto files and the pinned tool versions, so CI can check
# `npm run gen && git diff --exit-code src/gen`.
set -euo pipefail
cd "$(dirname "$0")/.."
npx --no-install buf lint
npx --no-install buf generate
