#!/usr/bin/env bash
# The GPU tests and benchmarks, in two device-tool calls that each fit its 10 minutes:
#   bash bench/device_run.sh tests    GPU tests, then per-call overhead and first-call latency
#   bash bench/device_run.sh bench    gpu_bench.py, then kernel_bench.py (kernels alone)
# Results and logs land in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 FUSIONRT_CACHE_DIR=/tmp/fusionrt-cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/env.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/env.txt"
case "${1:-}" in
  tests)
    timeout ${TEST_S:-360} python3 -m pytest -q -n 8 -m gpu tests/rt -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" | tail -30
    timeout ${OVERHEAD_S:-200} python3 bench/overhead_bench.py --out "$OUT/overhead.json" 2>&1 | tee "$OUT/overhead.log" | tail -20 ;;
  bench)
    timeout ${BENCH_S:-420} python3 bench/gpu_bench.py --out "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | tail -30
    timeout ${KERNEL_S:-150} python3 bench/kernel_bench.py --out "$OUT/kernels.json" 2>&1 | tee "$OUT/kernels.log" | tail -30 ;;
  *) echo "usage: bash bench/device_run.sh tests|bench" >&2; exit 2 ;;
esac
