#!/usr/bin/env bash
# The main job: install, build, then `kiln doctor` and `kiln bench` on the best device present, and a
# generation when a model folder is given: scripts/run.sh [MODEL_DIR [PROMPT]]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
./build/kiln doctor
./build/kiln bench
if [ $# -ge 1 ]; then
  ./build/kiln generate -m "$1" -p "${2:-Give me a short introduction to large language models.}" -n 128
fi
