#!/usr/bin/env bash
# Installs the Debian 12 packages kiln builds and tests with (idempotent).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config ccache libhwy-dev libopenblas-openmp-dev liblapacke-dev
      nlohmann-json3-dev libcli11-dev libgtest-dev libbenchmark-dev python3-dev python3-numpy python3-scipy
      pybind11-dev python3-pybind11 libpcre2-dev libutf8proc-dev)
command -v npm >/dev/null || pkgs+=(npm)  # for the test data (scripts/fetch-test-data.sh)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
