#!/usr/bin/env bash
# Installs, builds and runs every test; fails when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/fetch-test-data.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
