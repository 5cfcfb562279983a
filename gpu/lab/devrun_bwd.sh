#!/usr/bin/env bash
# Issue 23's backward runs (sixth session, helper bwd), one device call each: bash gpu/lab/devrun_bwd.sh STEP…
#   check     rung 7's tests but the long ones, the rung 4/5 smoke (the changed pre-pass), autograd's tests
#   (rungs and train are skipped once a step has failed)
#   rungs     gpu.lab.backward_rungs at N = 1K, 4K, 16K (rung 5, rung 7 and its variants) → $OUT/bwd-rungs.json
#   ncu       what bounds rung 7's default at d = 64 and 128 (N = 4096, 16k tokens, third launch)
#   long      rung 7's long tests (FlashAttention-3's lengths, hypothesis shapes)
#   sanitize  memcheck and racecheck on small rung 7 launches (default, unsplit, deterministic); memcheck also at 256
#             query planes, where rung 7 rounds dQ itself
#   autograd  autograd's tests and all of rung 7's (after a change of default)
#   train64   gpu.lab.training_speed at d = 64 only, fp16
#   train     gpu.lab.training_speed: fp16 over the whole grid, bf16 at N = 4K, 16K → $OUT/training-*.json
# Logs in $OUT/logs.tgz (rewritten after each step); the last lines printed are one summary line per step.
set -u
OUT=${OUT:-/tmp/devrun/out}
LOGS=/tmp/devrun/logs
mkdir -p "$OUT" "$LOGS"
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -n 1)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-180}
summary=()
failed=0  # a failed step skips the timing steps after it
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS
  timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1; local rc=$?
  [ $rc = 0 ] || failed=1
  summary+=("$name rc=$rc $((SECONDS - t0))s: $(grep -v '^\s*$' "$LOGS/$name.log" | tail -n 1 | cut -c1-200)")
  tar czf "$OUT/logs.tgz" -C "$LOGS" .; }
SMALL="import gpu; from gpu.lab.checks import random_qkv, random_like; from gpu.tiling import backward_warpgroup_tiles as t
for d, tiles, det in ((64, None, False), (128, None, False), (64, t(2), False), (128, None, True), (64, t(2), True)):
    q, k, v = random_qkv(1, 2, 200, 300, d, 'float16', seed=d); o, l = gpu.flash_attention(q, k, v, causal=True, return_lse=True)
    gpu.flash_attention_backward(q, k, v, o, l, random_like(q, 1), causal=True, kernel=7, tiles=tiles, deterministic=det)
print('ran 5 small rung 7 launches')"
# 256 query planes: rung 7 rounds dQ itself (gpu.backward.FUSED_PLANES), plain and deterministic
FUSED="${SMALL//(1, 2, 200/(128, 2, 200}"
FUSED="${FUSED//5 small/5 small 256-plane}"
NCU_METRICS='regex:^(sm__pipe_tensor.*cycles_active\.avg\.pct_of_peak_sustained_active|sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active|smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|l1tex__data_pipe_lsu_wavefronts_mem_shared\.sum|lts__t_sectors_op_red\.sum|lts__t_sectors_op_atom\.sum)$'
for s in "$@"; do case $s in
  check) step env 30 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
         step smoke45 120 python3 -m gpu.lab.harness --smoke --rungs 4,5,7
         step test7 300 python3 -m pytest -q -x -p no:cacheprovider -m gpu tests/test_gpu_rung7.py -k "not any_shape and not lengths"
         step autograd 120 python3 -m pytest -q -x -p no:cacheprovider -m gpu tests/test_gpu_autograd.py ;;
  rungs) [ $failed = 0 ] || { summary+=("rungs skipped: a step failed"); continue; }
         step bwd_rungs 200 python3 -m gpu.lab.backward_rungs --ns 1024,4096,16384 --json "$OUT/bwd-rungs.json" ;;
  ncu) for d in 64 128; do
         step "ncu_d$d" 120 ncu --clock-control none --kernel-name flash2_wgmma_bwd --launch-skip 2 --launch-count 1 \
           --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --metrics "$NCU_METRICS" \
           python3 -c "import sys; from gpu.lab.checks import random_qkv, random_like; from gpu.flash import flash_attention; from gpu.backward import flash_attention_backward as b; d = int(sys.argv[1]); q, k, v = random_qkv(4, 2048 // d, 4096, 4096, d, 'float16', seed=1); o, l = flash_attention(q, k, v, return_lse=True); do = random_like(q, 2); [b(q, k, v, o, l, do, kernel=7) for _ in range(3)]; print('done')" "$d"
       done ;;
  long) step long7 400 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_rung7.py -k "any_shape or lengths" ;;
  sanitize) step memcheck7 150 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -c "$SMALL"
            step memcheck7_fused 150 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -c "$FUSED"
            step racecheck7 200 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -c "$SMALL" ;;
  train) [ $failed = 0 ] || { summary+=("train skipped: a step failed"); continue; }
         step train16 300 python3 -m gpu.lab.training_speed --dtypes float16 --json "$OUT/training-fp16.json"
         step train_bf16 150 python3 -m gpu.lab.training_speed --dtypes bfloat16 --ns 4096,16384 --json "$OUT/training-bf16.json" ;;
  train64) [ $failed = 0 ] || { summary+=("train64 skipped: a step failed"); continue; }
           step train64 150 python3 -m gpu.lab.training_speed --ds 64 --dtypes float16 --json "$OUT/training-fp16-d64.json" ;;
  autograd) step autograd7 200 python3 -m pytest -q -x -p no:cacheprovider -m gpu tests/test_gpu_autograd.py tests/test_gpu_rung7.py ;;
  *) echo "unknown step $s"; exit 2 ;;
esac; done
printf '%s\n' "${summary[@]}"
