#!/usr/bin/env bash
# One device call: environment, checks, GPU tests, tuning tables, sanitizers, compare, benchmarks, training demo.
# Usage (on the device machine, from the repo root): bash gpu/lab/devrun.sh [steps…]
#   steps: env smoke test tune_fwd tune_bwd rung1 … rung6 hopper tune6 ncu6 sanitize sanitize6 compare bench bench_bwd ladder train cli
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
  rung[1-6]) step "$s" 240 python3 -m gpu.lab.harness --kernel "${s#rung}" ;;
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
from gpu import plot, results, render_train, train
report = train.train(command="flashsim demo train")
Console(width=180).print(render_train.training_table(report))
results.write(report, sys.argv[1] + "/train-h100.json")
open(sys.argv[1] + "/train-h100.svg", "w").write(plot.line_chart(report["losses"], title="tiny causal LM: training loss", x_label="step", y_label="cross-entropy"))
' "$OUT" ;;
esac; done
for s in $steps; do case $s in
  env) cat "$LOGS/env.log" ;;
  tune_fwd|tune_bwd|tune6|rung[1-6]) sed -n "/^   d /,\$p" "$LOGS/$s.log" ;;
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
