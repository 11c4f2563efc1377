#!/usr/bin/env bash
# Packs what the GPU machine needs into .gpu/bundle.tar.xz: the CLI, the C++ tests,
# libkiln.a (for the Python module, which must be built there for its Python) and
# the shared libraries that machine lacks (Highway, OpenBLAS and theirs).
# Then, on the device: `scripts/gpu-run.sh` (carry .gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/libkiln.a ] || scripts/build.sh
stage=$(mktemp -d)
mkdir -p "$stage/lib" .gpu
cp build/kiln build/tests/kiln_tests build/libkiln.a /usr/lib/x86_64-linux-gnu/liblapacke.a "$stage/"
strip "$stage/kiln" "$stage/kiln_tests"
for l in libhwy.so.1 libgomp.so.1 libgfortran.so.5 libquadmath.so.0; do
  cp -L "/lib/x86_64-linux-gnu/$l" "$stage/lib/"
done
cp -L /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0 "$stage/lib/"  # the build CMake links
# xz, not gzip: the three copies of the CUDA code must fit the 64 MiB a device call carries
# (gzip 72 MB, xz 52 MB)
rm -f .gpu/bundle.tgz
tar cf - -C "$stage" . | xz -T0 -6 > .gpu/bundle.tar.xz
rm -rf "$stage"
ls -la .gpu/bundle.tar.xz
