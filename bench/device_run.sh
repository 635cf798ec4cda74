#!/usr/bin/env bash
# One device-tool call: GPU tests, then the benchmarks, each under its own time limit so the
# whole call fits the device tool's 10 minutes. Results land in $OUT.
#   device run: bash bench/device_run.sh [gpu_bench.py args...]
set -uo pipefail
export PYTHONUNBUFFERED=1 FUSIONRT_CACHE_DIR=/tmp/fusionrt-cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/env.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/env.txt"
timeout ${TEST_S:-200} python3 -m pytest -q -n 4 -m gpu tests/rt -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" | tail -30
timeout ${BENCH_S:-200} python3 bench/gpu_bench.py --out "$OUT/bench.json" "$@" 2>&1 | tee "$OUT/bench.log" | tail -30
timeout ${KERNEL_S:-90} python3 bench/kernel_bench.py --out "$OUT/kernels.json" 2>&1 | tee "$OUT/kernels.log" | tail -20
timeout ${OVERHEAD_S:-90} python3 bench/overhead_bench.py --out "$OUT/overhead.json" 2>&1 | tee "$OUT/overhead.log" | tail -20
