# What the per-issue device scripts (devrun_decode.sh, devrun_variants.sh) share: $OUT, the tools on PATH, the tree
# on PYTHONPATH, and `step NAME LIMIT CMD…` (runs CMD under a time limit, its log in $OUT/NAME.log, one summary line).
set -u
OUT=${OUT:-/tmp/devrun/out}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -n 1)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s: $(grep -v '^\s*$' "$OUT/$name.log" | tail -n 1 | cut -c1-200)"; }
