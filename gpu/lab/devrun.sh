#!/usr/bin/env bash
# One device call: environment, checks, GPU tests, tuning tables, sanitizers, compare, benchmarks, training demo.
# Usage (on the device machine, from the repo root): bash gpu/lab/devrun.sh [steps…]
#   steps: env smoke test tune_fwd tune_bwd rung1 … rung7 hopper tune6 ncu6 sanitize sanitize6 compare bench bench_bwd ladder train cli
#          rung7_test sanitize7 ncu_r7 quick tax tune_wg bwd_rungs profile_autograd
# Logs go to /tmp/devrun/logs and come back as $OUT/logs.tgz (rewritten after each step); JSON and SVG results land in $OUT (8 files at most
# come back). The reply carries the tail of stdout, so each step ends with a one-line summary, printed last.
set -u
OUT=${OUT:-/tmp/devrun/out}
LOGS=/tmp/devrun/logs
mkdir -p "$OUT" "$LOGS"
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -n 1)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-180}
CLI=(python3 -m sim.cli)
steps=${*:-env smoke test tune_fwd tune_bwd}
summary=()
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS
  timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1; local rc=$?
  summary+=("$name rc=$rc $((SECONDS - t0))s: $(grep -v '^\s*$' "$LOGS/$name.log" | tail -n 1 | cut -c1-160)")
  tar czf "$OUT/logs.tgz" -C "$LOGS" .; }  # after every step: what finished comes back even if the call is cut off
for s in $steps; do case $s in
  env) step env 60 bash -c 'nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; python3 -c "import cupy, torch, numpy, click, rich; print(cupy.__version__, torch.__version__, numpy.__version__, click.__version__)"; which ncu compute-sanitizer' ;;
  smoke) step smoke 240 python3 -m gpu.lab.harness --smoke ;;
  test) step test 420 python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests --ignore tests/test_lessons.py --ignore tests/test_lesson_quotes.py ;;  # nbformat is not on the device
  tune_fwd) step tune_fwd 240 python3 -m gpu.lab.harness --tune forward --dtypes float16 ;;
  tune_bwd) step tune_bwd 240 python3 -m gpu.lab.harness --tune backward --dtypes float16 ;;
  rung[1-7]) step "$s" 240 python3 -m gpu.lab.harness --kernel "${s#rung}" ;;
  rung7_test) step smoke7 120 python3 -m gpu.lab.harness --smoke --rungs 7
              step test7 480 python3 -m pytest -m gpu -q --maxfail=6 -rs -p no:cacheprovider tests/test_gpu_rung7.py tests/test_gpu_backward.py tests/test_gpu_autograd.py ;;
  sanitize7) step memcheck7 200 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m gpu.lab.harness --smoke --rungs 7
             step racecheck7 300 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m gpu.lab.harness --smoke --rungs 7 ;;
  ncu_r7) for d in 64 128; do  # what bounds rung 7: its 3rd launch at N = 4096, 16k tokens
            step "ncu_r7_d$d" 180 ncu --clock-control none --kernel-name flash2_wgmma_bwd --launch-skip 2 --launch-count 1 \
              --section SpeedOfLight --section WarpStateStats \
              --metrics 'regex:^(sm__pipe_tensor.*cycles_active\.avg\.pct_of_peak_sustained_active|sm__inst_executed_pipe_xu\.avg\.pct_of_peak_sustained_active|smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio)$' \
              python3 -c "import sys; from gpu.lab.checks import random_qkv, random_like; from gpu.flash import flash_attention; from gpu.backward import flash_attention_backward as b; d = int(sys.argv[1]); q, k, v = random_qkv(4, 2048 // d, 4096, 4096, d, 'float16', seed=1); o, l = flash_attention(q, k, v, return_lse=True); do = random_like(q, 2); [b(q, k, v, o, l, do, kernel=7) for _ in range(3)]" "$d"
          done ;;
  tax) step tax 150 python3 -m gpu.lab.autograd_tax
       step tax_causal 150 python3 -m gpu.lab.autograd_tax --causal ;;
  bwd_rungs) step bwd_rungs 200 python3 -m gpu.lab.backward_rungs ;;
  profile_autograd) step profile_autograd 120 python3 -c "
import cProfile, pstats, torch
from gpu.lab.autograd_tax import calls
_, through = calls(4096, 128, True)
for _ in range(3): through()
torch.cuda.synchronize()
cProfile.run('for _ in range(20): through()', '/tmp/devrun/prof')
pstats.Stats('/tmp/devrun/prof').sort_stats('tottime').print_stats(22)
import time
from gpu.dlpack import as_cupy, cupy_view
t = torch.empty(4, 16, 4096, 128, dtype=torch.bfloat16, device='cuda')
for f in (as_cupy, cupy_view):
    f(t); t0 = time.perf_counter()
    for _ in range(1000): f(t)
    print('bridge', f.__name__, round((time.perf_counter() - t0) * 1e3, 1), 'us per tensor')
t0 = time.perf_counter()
for _ in range(1000): torch.empty(4, 16, 4096, 128, dtype=torch.bfloat16, device='cuda')
print('bridge torch.empty', round((time.perf_counter() - t0) * 1e3, 1), 'us per tensor')" ;;
  tune_wg) step tune_wg 200 python3 -m gpu.lab.harness --tune backward --only 7 --dtypes float16 ;;
  quick) step bench_quick 300 "${CLI[@]}" bench gpu --quick --json "$OUT/bench-quick-h100.json"
         step bench_quick_bwd 300 "${CLI[@]}" bench gpu --quick --backward --json "$OUT/bench-quick-backward-h100.json" ;;
  hopper) step probe 120 python3 -m gpu.lab.hopper_probe
          step hopper_test 300 python3 -m pytest -m gpu -q -x -rs -p no:cacheprovider tests/test_gpu_hopper.py
          step tma_metrics 60 bash -c 'ncu --query-metrics | grep -i -E "tma|bulk|utlb|xbar2l1tex" | head -40' ;;
  tune6) step tune6 300 python3 -m gpu.lab.harness --tune forward --only 6 --dtypes float16 ;;
  ncu6) for d in 64 128; do  # what bounds rung 6: the 3rd launch of its default at N = 4096, 16k tokens
            step "ncu6_d$d" 180 ncu --clock-control none --kernel-name flash2_v4_fwd --launch-skip 2 --launch-count 1 \
              --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats \
              --metrics 'regex:^(sm__pipe_tensor.*cycles_active\.avg\.pct_of_peak_sustained_active|sm__inst_executed_pipe_xu\.avg\.pct_of_peak_sustained_active|smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio)$' \
              python3 -c "import sys; from gpu.lab.checks import random_qkv; from gpu.flash import flash_attention; d = int(sys.argv[1]); q, k, v = random_qkv(4, 2048 // d, 4096, 4096, d, 'float16', seed=1); [flash_attention(q, k, v) for _ in range(3)]" "$d"
          done ;;
  sanitize) step memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m gpu.lab.harness --smoke
            step racecheck 400 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m gpu.lab.harness --smoke ;;
  sanitize6) step memcheck6 200 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m gpu.lab.harness --smoke --rungs 6
             step racecheck6 240 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m gpu.lab.harness --smoke --rungs 6 ;;
  compare) step compare 120 "${CLI[@]}" compare --n 2048 --d 64 --json "$OUT/compare-forward-h100.json"
           step compare_bwd 180 "${CLI[@]}" compare --backward --n 2048 --d 64 --json "$OUT/compare-backward-h100.json"
           step compare_bwd_causal 180 "${CLI[@]}" compare --backward --n 2048 --d 128 --causal --dtype bf16 --json "$OUT/compare-backward-causal-h100.json" ;;
  bench) step bench 300 "${CLI[@]}" bench gpu --json "$OUT/bench-h100.json" --markdown "$OUT/bench-h100.md" ;;
  bench_bwd) step bench_bwd 420 "${CLI[@]}" bench gpu --backward --json "$OUT/bench-backward-h100.json" --markdown "$OUT/bench-backward-h100.md" ;;
  cli) step cli_train 120 "${CLI[@]}" demo train --steps 20 --plot /tmp/devrun/train.svg
       step cli_compare 120 "${CLI[@]}" compare --backward --no-counters --n 512 --causal
       step cli_bench 240 "${CLI[@]}" bench gpu --quick --backward ;;
  ladder) step ladder 240 python3 -m gpu.lab.ladder --json "$OUT/ladder-h100.json" ;;
  train) step train 240 python3 -c '
import sys
from rich.console import Console
from gpu.lab import plot, results, render_train, train
report = train.train(command="flashsim demo train")
Console(width=180).print(render_train.training_table(report))
results.write(report, sys.argv[1] + "/train-h100.json")
open(sys.argv[1] + "/train-h100.svg", "w").write(plot.line_chart(report["losses"], title="tiny causal LM: training loss", x_label="step", y_label="cross-entropy"))
' "$OUT" ;;
esac; done
for s in $steps; do case $s in
  env) cat "$LOGS/env.log" ;;
  tune_fwd|tune_bwd|tune6|rung[1-7]) sed -n "/^   d /,\$p" "$LOGS/$s.log" ;;
  rung7_test) grep -E "FAIL" "$LOGS/smoke7.log" | cut -c1-300; grep -E "^(FAILED|ERROR)|Error|passed|failed" "$LOGS/test7.log" | cut -c1-400 | head -n 20 ;;
  tax) tail -n 7 "$LOGS/tax.log"; tail -n 7 "$LOGS/tax_causal.log" ;;
  bwd_rungs) cat "$LOGS/bwd_rungs.log" ;;
  profile_autograd) grep -E "ncalls|function calls|^ +[0-9]|bridge" "$LOGS/profile_autograd.log" | head -n 30 | cut -c1-160 ;;
  tune_wg) sed -n "/^   d /,\$p" "$LOGS/tune_wg.log" ;;
  sanitize7) tail -n 3 "$LOGS"/memcheck7.log "$LOGS"/racecheck7.log ;;
  ncu_r7) grep -h -E "Duration|Compute \(SM\)|pipe_tensor|pipe_xu|Issue Slots|Warp Cycles Per Issued|stalled" "$LOGS"/ncu_r7_d*.log | awk '$NF+0 > 0.05' | cut -c1-150 ;;
  quick) grep -E "│ (fp16|bf16)" "$LOGS/bench_quick.log" "$LOGS/bench_quick_bwd.log" | cut -c1-250 ;;
  ncu6) grep -h -E "Duration|Compute \(SM\)|pipe_tensor|pipe_xu|Issue Slots|Warp Cycles Per Issued|stalled" "$LOGS"/ncu6_d*.log | awk '$NF+0 > 0.05' | cut -c1-150 ;;
  ladder) tail -n 4 "$LOGS/ladder.log" ;;
  hopper) cat "$LOGS/probe.log"; grep -E "^(FAILED|ERROR)|Error|error|passed|failed" "$LOGS/hopper_test.log" | cut -c1-300 | head -n 20; cat "$LOGS/tma_metrics.log" ;;
  smoke) grep -E "FAIL" "$LOGS/smoke.log" ;;
  sanitize|sanitize6) tail -n 3 "$LOGS"/memcheck*.log "$LOGS"/racecheck*.log ;;
  test) grep -E "^(FAILED|ERROR)" "$LOGS/test.log" | cut -c1-200 | head -n 40 ;;
  compare) tail -n 12 "$LOGS/compare_bwd.log"; tail -n 12 "$LOGS/compare_bwd_causal.log" ;;
  bench) grep -E "│ (fp16|bf16)" "$LOGS/bench.log" | cut -c1-120 ;;
  bench_bwd) grep -E "│ (fp16|bf16)|│ +[0-9]+ │" "$LOGS/bench_bwd.log" | cut -c1-120 ;;
  train) cat "$LOGS/train.log" ;;
  cli) tail -n 4 "$LOGS/cli_train.log"; tail -n 3 "$LOGS/cli_compare.log"; grep -E "│ +(fp16|[0-9]+) " "$LOGS/cli_bench.log" | cut -c1-120 ;;
esac; done
printf '%s\n' "${summary[@]}"
