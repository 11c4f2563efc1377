#!/bin/bash
# On the GPU machine, with .gpu/bundle.tar.xz (scripts/gpu-bundle.sh cli) carried: the
# 64 x 64 triangular solve's panels of eight against four (bench/ab_trsm_panel8.py),
# then the GPU linalg tests with it on.
scripts/gpu-run.sh none >/dev/null 2>&1; G=/tmp/kiln-gpu
export LD_LIBRARY_PATH=$G/lib:$(dirname $(command -v nvcc))/../targets/x86_64-linux/lib PYTHONPATH=$G/python:tests/python
nvidia-smi --query-gpu=name --format=csv,noheader
python3 bench/ab_trsm_panel8.py
KILN_TRSM_PANEL8=1 python3 -m unittest test_gpu_linalg_lu test_gpu_linalg_solver 2>&1 | tail -3
