#!/usr/bin/env bash
# One device-tool call: GPU tests, then the benchmark. Results land in $OUT and bench/results/.
#   device run: bash bench/device_run.sh [gpu_bench.py args...]
set -uo pipefail
export PYTHONUNBUFFERED=1 FUSIONRT_CACHE_DIR=/tmp/fusionrt-cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/env.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/env.txt"
python3 -m pytest -q -n 4 -m gpu tests/rt -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" | tail -25
python3 bench/gpu_bench.py --out "$OUT/bench.json" "$@" 2>&1 | tee "$OUT/bench.log" | tail -30
