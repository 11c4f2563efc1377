#!/usr/bin/env bash
# The main job: install, build, then `kiln doctor` and `kiln bench` on the best device present.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
./build/kiln doctor
./build/kiln bench
