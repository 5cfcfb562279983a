#!/usr/bin/env bash
# One device call for the forward's variants (issue 25, part 1): tests, sanitizers, bytes against the simulator, speed.
# Usage (on the device machine, from the repo root): bash gpu/lab/devrun_variants.sh [steps…]
#   steps: env test plain memcheck sanitize (memcheck and racecheck) compare compare64 bench
# Logs and JSON land in $OUT; each step prints its last line to stdout.
source "$(dirname "$0")/devrun_lib.sh"  # set -u, $OUT, PATH, PYTHONPATH, step
steps=${*:-env test plain sanitize compare bench}
for s in $steps; do case $s in
  env) step env 60 bash -c 'nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import cupy, torch; print(cupy.__version__, torch.__version__)"; which ncu compute-sanitizer' ;;
  test) step test 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_variants.py ;;
  plain) step plain 120 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/test_gpu_hopper.py -k "test_rung_6 and not any_shape" ;;
  memcheck) step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m gpu.lab.variant_checks ;;
  sanitize) step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m gpu.lab.variant_checks
            step racecheck 200 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m gpu.lab.variant_checks ;;
  compare) step compare 200 python3 -m gpu.lab.compare_variants --d 128 --json "$OUT/compare-variants-d128.json" ;;
  compare64) step compare64 200 python3 -m gpu.lab.compare_variants --d 64 --json "$OUT/compare-variants-d64.json" ;;
  bench) step bench 300 python3 -m gpu.lab.bench_variants --ns 4096 --json "$OUT/bench-variants.json" ;;
esac; done
