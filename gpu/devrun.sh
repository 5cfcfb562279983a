#!/usr/bin/env bash
# One device call: environment, GPU tests, kernel checks + tuning table, sanitizers, compare, benchmark.
# Usage (on the device machine, from the repo root): bash gpu/devrun.sh [steps…]   steps: env test tune sanitize compare bench quick
# Logs go to $OUT (or /tmp/devrun); the reply carries the tail of stdout, so each step ends with a short summary.
set -u
OUT=${OUT:-/tmp/devrun}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -n 1)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
steps=${*:-env test sanitize compare quick}
summary=()
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  summary+=("$name rc=$rc $((SECONDS - t0))s: $(tail -n 1 "$OUT/$name.log" | cut -c1-150)"); }
ncu_probe() {  # the kernel's cp.async instructions and the bytes L2 and the crossbar see, padded vs swizzled rows
  for variant in "" --padded-rows; do
    echo "== v2 d=64 N=2048 heads=16 ${variant:-swizzled rows}"
    ncu --clock-control none --csv --print-units base --kernel-name regex:flash2_v2_fwd --launch-count 1 \
      --metrics lts__t_sectors_srcunit_tex_op_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum,smsp__inst_executed_op_ldgsts.sum,gpu__time_duration.sum \
      python3 -m gpu.counters --kernel v2 --n 2048 --nk 2048 --d 64 --batch 1 --heads 16 --dtype float16 $variant 2>&1 | grep -E '"(lts|l1tex|smsp|gpu)__|ERROR' | awk -F'","' '{print $(NF-2), $NF}'
  done
  echo "expected (simulator): read $((2 * 16 * (2048 * 64 + 16 * 2 * 2048 * 64))) bytes = $((2 * 16 * (2048 * 64 + 16 * 2 * 2048 * 64) / 32)) sectors, ldgsts $((2 * 16 * (2048 * 64 + 16 * 2 * 2048 * 64) / 512)) warp instructions"
}
export -f ncu_probe
export COLUMNS=${COLUMNS:-160}
for s in $steps; do case $s in
  ncu) step ncu_probe 100 bash -c ncu_probe ;;
  env) step env 40 bash -c 'nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; python3 -c "import cupy, torch, ml_dtypes, numpy as np; print(cupy.__version__, torch.__version__, np.__version__); x = cupy.zeros(4, ml_dtypes.bfloat16); print(\"cupy bf16 ok\", x.dtype)"; which ncu compute-sanitizer' ;;
  test) step test 280 python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests/test_gpu_flash.py tests/test_gpu_standard.py tests/test_gpu_errors.py ;;
  tune) step tune 200 python3 -m gpu.harness --tune ;;
  sanitize) step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m gpu.harness --smoke
            step racecheck 180 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m gpu.harness --smoke ;;
  compare) step compare 90 python3 -c 'from sim.cli import main; main()' compare --n 2048 --d 64
           step compare_causal 90 python3 -c 'from sim.cli import main; main()' compare --n 2048 --d 128 --causal --dtype bf16 ;;
  bench) step bench 300 python3 -c 'from sim.cli import main; main()' bench gpu --json "$OUT/bench.json" ;;
  quick) step quick 200 python3 -c 'from sim.cli import main; main()' bench gpu --quick --json "$OUT/bench_quick.json" ;;
esac; done
for s in $steps; do case $s in env) cat "$OUT/env.log" ;; tune) sed -n "/^   d /,\$p" "$OUT/tune.log" ;; compare) cat "$OUT/compare.log" "$OUT/compare_causal.log" ;; ncu) cat "$OUT/ncu_probe.log" ;; bench) cat "$OUT/bench.log" ;; quick) cat "$OUT/quick.log" ;; esac; done
printf '%s\n' "${summary[@]}"
