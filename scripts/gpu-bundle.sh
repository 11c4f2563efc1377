#!/usr/bin/env bash
# Packs what the GPU machine needs into .gpu/bundle.tar.xz: libkiln.a (for the
# Python module, which must be built there for its Python), the shared libraries
# that machine lacks (Highway, OpenBLAS and theirs), and the CLI or the C++ tests:
#   scripts/gpu-bundle.sh [cli] [tests]   (default: cli)
# Each binary holds its own copy of the CUDA code, and a device call carries at most
# 64 MiB: with both, the bundle is past that (79 MB in December 2026). Then, on the
# device: `scripts/gpu-run.sh` (carry .gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/libkiln.a ] || scripts/build.sh
stage=$(mktemp -d)
mkdir -p "$stage/lib" .gpu
cp build/libkiln.a /usr/lib/x86_64-linux-gnu/liblapacke.a "$stage/"
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(cli)
for p in "${parts[@]}"; do
  case $p in
    cli) cp build/kiln "$stage/" && strip "$stage/kiln" ;;
    tests) cp build/tests/kiln_tests "$stage/" && strip "$stage/kiln_tests" ;;
    *) echo "gpu-bundle.sh: unknown part $p (cli, tests)" >&2; exit 1 ;;
  esac
done
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
size=$(stat -c %s .gpu/bundle.tar.xz)
[ "$size" -le $((64 * 1024 * 1024)) ] || echo "gpu-bundle.sh: $size bytes is past the 64 MiB a device call carries" >&2
