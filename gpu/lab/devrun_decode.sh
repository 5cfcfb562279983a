#!/usr/bin/env bash
# One device call for rung 8 (Flash-Decoding, issue 25 part 2): tests, sanitizers, bytes against the simulator, speed.
# Usage (on the device machine, from the repo root): bash gpu/lab/devrun_decode.sh [steps…]
#   steps: env test sanitize (= memcheck racecheck) compare bench tune batch1 waves graphs variants merges
# Logs and JSON land in $OUT; each step prints its last line to stdout.
source "$(dirname "$0")/devrun_lib.sh"  # set -u, $OUT, PATH, PYTHONPATH, step
steps=${*:-env test sanitize compare bench tune}
# the sanitizers' program: paged (pages of 16, causal; splits from the model, 1, 3 (a cluster), 128 (ticket); the
# combine fused and separate; 16 each of the three ways), contiguous (Nq 5; splits 4 and 16 merged by a cluster, 17
# spread; 16 each of the three ways), and a refused block_table entry and length
cat >/tmp/decode_sanitize.py <<'PY'
import numpy as np, cupy
import gpu
from gpu import decode_launch, decoding
rng = np.random.default_rng(0)
q = cupy.asarray(rng.standard_normal((3, 8, 2, 128)).astype(np.float16))
kc = cupy.asarray(rng.standard_normal((200, 16, 2, 128)).astype(np.float16))
table = cupy.asarray(rng.permutation(200)[:3 * 60].reshape(3, 60).astype(np.int32))
seqlens = cupy.asarray(np.array([900, 1, 333], np.int32))
for splits in (None, 1, 3, 128):
    gpu.decode(q, kc, kc, block_table=table, cache_seqlens=seqlens, causal=True, splits=splits, check=True)
    p = decoding.prepare(q, kc, kc, table, seqlens, True, None, splits)
    decoding.launch(cupy, p, fused=False)
k = cupy.asarray(rng.standard_normal((3, 2, 1500, 128)).astype(np.float16))
q5 = cupy.asarray(rng.standard_normal((3, 8, 5, 128)).astype(np.float16))
for splits in (None, 1, 4, 16, 17):
    gpu.decode(q5, k, k, causal=True, splits=splits, check=True)
for merge in decode_launch.MERGES:
    decoding.launch(cupy, decoding.prepare(q5, k, k, None, None, True, None, 16), merge=merge)
    decoding.launch(cupy, decoding.prepare(q, kc, kc, table, seqlens, True, None, 16), merge=merge)
bad = table.copy(); bad[1, 0] = 999
for t, s in ((bad, cupy.asarray(np.array([900, 5, 333], np.int32))), (table, cupy.asarray(np.array([900, 0, 2000], np.int32)))):
    for splits in (1, 3):
        o = gpu.decode(q, kc, kc, block_table=t, cache_seqlens=s, splits=splits)
        try:
            gpu.decode_errors()
        except Exception as e:
            print("refused:", e)
cupy.cuda.Device().synchronize()
print("sanitize program done")
PY
for s in $steps; do case $s in
  env) step env 60 bash -c 'nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import cupy, torch; print(cupy.__version__, torch.__version__)"; which ncu compute-sanitizer; date -u' ;;
  test) step test 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_decoding.py ;;
  sanitize|memcheck) step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 python3 /tmp/decode_sanitize.py ;;&
  sanitize|racecheck) step racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 python3 /tmp/decode_sanitize.py ;;
  compare) step compare-contiguous 90 python3 -m sim.cli compare-decode --json "$OUT/compare-decode-contiguous-h100.json"
           step compare-paged 90 python3 -m sim.cli compare-decode --page-size 256 --json "$OUT/compare-decode-paged-h100.json"
           step compare-paged16 90 python3 -m sim.cli compare-decode --page-size 16 --nq 4 --causal --dtype bf16 --batch 3 --nk 3000 --json "$OUT/compare-decode-paged16-nq4-h100.json" ;;
  bench) step bench 240 python3 -m sim.cli bench decode --json "$OUT/bench-decode-h100.json" ;;
  tune) step tune 120 python3 -m gpu.lab.tune_decode paged ;;
  batch1) step batch1 60 python3 -m gpu.lab.tune_decode batch1 ;;
  waves) step waves 60 python3 -m gpu.lab.tune_decode waves ;;
  graphs) step graphs 120 python3 -m gpu.lab.decode_graphs steps ;;
  variants) step variants 120 python3 -m gpu.lab.decode_graphs variants ;;
  merges) step merges 150 python3 -m gpu.lab.decode_graphs merges ;;
esac; done
