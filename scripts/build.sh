#!/usr/bin/env bash
# Configures and builds kiln in ./build (CUDA backend when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=/usr/bin/python3 "$@"
ninja -C build -j"$(nproc)"
