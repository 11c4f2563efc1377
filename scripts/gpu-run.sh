#!/usr/bin/env bash
# On the GPU machine, from the repository root with .gpu/bundle.tar.xz carried there
# (scripts/gpu-bundle.sh makes it): builds the Python module for that machine's
# Python against the bundled libkiln.a, then runs what is asked:
#   scripts/gpu-run.sh [tests] [pytests] [bench] [kiln-bench]   (default: all four)
set -uo pipefail
cd "$(dirname "$0")/.."
G=/tmp/kiln-gpu
mkdir -p $G && tar xJf .gpu/bundle.tar.xz -C $G
CUDA_LIB=$(dirname "$(command -v nvcc)")/../targets/x86_64-linux/lib
export LD_LIBRARY_PATH=$G/lib:$CUDA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PY=${PYTHON:-python3}

build_module() {
  local out=$G/python ext inc
  mkdir -p $out/kiln && cp -r python/kiln/. $out/kiln/
  ext=$($PY -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
  inc=$($PY -c "import pybind11, sysconfig; print('-I' + pybind11.get_include(), '-I' + sysconfig.get_paths()['include'])")
  local objs=()
  for f in src/python/*.cpp; do
    o=$G/$(basename "$f" .cpp).o
    c++ -O2 -fPIC -std=c++20 -fvisibility=hidden -DKILN_WITH_CUDA=1 -Iinclude -Isrc $inc -c "$f" -o "$o" &
    objs+=("$o")
  done
  wait
  c++ -shared "${objs[@]}" $G/libkiln.a $G/liblapacke.a $G/lib/libhwy.so.1 $G/lib/libopenblas.so.0 -fopenmp -L"$CUDA_LIB" \
    -lcudart_static -lcublas -lcublasLt -lcusolver -ldl -lrt -lpthread -Wl,-rpath,$G/lib:"$CUDA_LIB" -o $out/kiln/_kiln$ext
  export PYTHONPATH=$out
}

rc=0
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests pytests bench kiln-bench)
build_module || { echo "Python module build failed"; exit 1; }
for s in "${steps[@]}"; do
  echo "==== $s"
  case $s in
    # the tokenizer tests read test data that only the CI machine fetches (npm); they are CPU-only
    tests) [ -x $G/kiln_tests ] || { echo "kiln_tests is not in the bundle (gpu-bundle.sh tests)"; rc=1; continue; }
           $G/kiln_tests --gtest_brief=1 --gtest_filter=-Tokenizer.*:ChatTemplate.* || rc=1 ;;
    pytests) PYTHONUNBUFFERED=1 $PY -m unittest discover -s tests/python 2>&1 || rc=1 ;;
    bench) PYTHONUNBUFFERED=1 $PY bench/bench.py ${BENCH_ARGS:-} || rc=1 ;;
    kiln-bench) [ -x $G/kiln ] || { echo "the CLI is not in the bundle (gpu-bundle.sh cli)"; rc=1; continue; }
                $G/kiln doctor && $G/kiln bench --repeats 20 || rc=1 ;;
    *) echo "unknown step $s"; rc=1 ;;
  esac
done
exit $rc
