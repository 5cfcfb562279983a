#!/usr/bin/env bash
# One device call: environment, GPU tests, kernel checks + tuning table, sanitizers, compare, benchmark.
# Usage (on the device machine, from the repo root): bash gpu/devrun.sh [steps…]   steps: env test tune sanitize compare bench quick
# Logs go to $OUT (or /tmp/devrun); the reply carries the tail of stdout, so each step ends with a short summary.
set -u
OUT=${OUT:-/tmp/devrun}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -n 1)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
steps=${*:-env test tune sanitize compare}
summary=()
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  summary+=("$name rc=$rc $((SECONDS - t0))s: $(tail -n 1 "$OUT/$name.log" | cut -c1-150)"); }
for s in $steps; do case $s in
  env) step env 40 bash -c 'nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; python3 -c "import cupy, torch, ml_dtypes, numpy as np; print(cupy.__version__, torch.__version__, np.__version__); x = cupy.zeros(4, ml_dtypes.bfloat16); print(\"cupy bf16 ok\", x.dtype)"; which ncu compute-sanitizer' ;;
  test) step test 280 python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests/test_gpu_flash.py tests/test_gpu_standard.py tests/test_gpu_errors.py ;;
  tune) step tune 200 python3 -m gpu.harness --tune ;;
  sanitize) step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m gpu.harness --smoke
            step racecheck 180 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m gpu.harness --smoke ;;
  compare) step compare 120 python3 -c 'from sim.cli import main; main()' compare --n 2048 --d 64 --heads 8
           step compare_causal 120 python3 -c 'from sim.cli import main; main()' compare --n 2048 --d 128 --heads 8 --causal --dtype bf16 ;;
  bench) step bench 420 python3 -c 'from sim.cli import main; main()' bench gpu --json "$OUT/bench.json" ;;
  quick) step quick 200 python3 -c 'from sim.cli import main; main()' bench gpu --quick --json "$OUT/bench_quick.json" ;;
esac; done
for s in $steps; do case $s in env) cat "$OUT/env.log" ;; tune) sed -n "/^   d /,\$p" "$OUT/tune.log" ;; compare) cat "$OUT/compare.log" "$OUT/compare_causal.log" ;; esac; done
printf '%s\n' "${summary[@]}"
