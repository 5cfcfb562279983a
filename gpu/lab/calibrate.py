"""Calibrate the machine model's rates on this GPU: `python -m gpu.lab.calibrate OUT.json`.

Each rate is the median of CUDA-event timings of one small kernel that does nothing else:
  dram_read   bytes/s reading a 2 GiB buffer once (16-byte loads), far larger than L2;
  l2_read     bytes/s reading a 16 MiB buffer 64 times (it stays in L2; loads that bypass L1);
  exp2        ex2.approx.f32 per second per SM (the MUFU), 8 independent chains per thread;
  fma         fp32 FMAs per second per SM (the FMA pipes), 8 independent chains per thread;
  tensor      fp16 FLOP/s of cuBLAS on 8192³ (wgmma on Hopper): the tensor rate a kernel can reach;
  launch      seconds per launch of an empty kernel, launched back to back.
`sim.machine.hardware.calibrated(preset, recording)` applies them to a preset.
"""

import json
import sys
from pathlib import Path

SOURCE = r"""
extern "C" __global__ void stream(const int4* __restrict__ x, long long n, int reps, int* out) {
    int acc = 0;
    for (int r = 0; r < reps; ++r)  // each pass shifted by one block, so that no SM re-reads its own lines from L1
        for (long long i = ((blockIdx.x + r) % gridDim.x) * (long long)blockDim.x + threadIdx.x; i < n;
             i += (long long)gridDim.x * blockDim.x) {
            int4 v = __ldcg(x + i);  // cached in L2 only
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    if (acc == 0x7fffffff) out[0] = acc;  // never true for the data used: keeps the loads
}
extern "C" __global__ void exps(float seed, int iters, float* out) {
    float a[8];
    for (int k = 0; k < 8; ++k) a[k] = seed * (threadIdx.x + k) * 1e-9f;
    for (int i = 0; i < iters; ++i)
        for (int k = 0; k < 8; ++k) asm volatile("ex2.approx.f32 %0, %0;" : "+f"(a[k]));
    float s = 0.f;
    for (int k = 0; k < 8; ++k) s += a[k];
    if (s == 12345.f) out[0] = s;
}
extern "C" __global__ void fmas(float seed, int iters, float* out) {
    float a[8];
    for (int k = 0; k < 8; ++k) a[k] = seed * (threadIdx.x + k);
    for (int i = 0; i < iters; ++i)
        for (int k = 0; k < 8; ++k) a[k] = fmaf(a[k], 0.999999f, 1e-7f);
    float s = 0.f;
    for (int k = 0; k < 8; ++k) s += a[k];
    if (s == 12345.f) out[0] = s;
}
extern "C" __global__ void empty() {}
"""


def calibrate() -> dict:
    """Every rate of the module docstring, measured on the current device."""
    from gpu import device
    from gpu.lab import timing

    cupy = device.require()
    sms = device.properties()["sm_count"]
    mod = cupy.RawModule(code=SOURCE)
    stream, exps, fmas, empty = (mod.get_function(n) for n in ("stream", "exps", "fmas", "empty"))
    out = cupy.zeros(1, cupy.int32)
    grid, block = (sms * 8,), (512,)

    def read_rate(nbytes: int, reps: int) -> float:
        x = cupy.ones(nbytes // 4, cupy.int32)
        n = nbytes // 16
        ms = timing.median_ms(lambda: stream(grid, block, (x, cupy.int64(n), cupy.int32(reps), out)))
        return nbytes * reps / (ms / 1e3)

    def per_sm(kernel, iters: int, per_iter: int) -> float:
        ms = timing.median_ms(lambda: kernel(grid, block, (cupy.float32(1.0), cupy.int32(iters), out)))
        return grid[0] * block[0] * iters * per_iter / (ms / 1e3) / sms

    a = cupy.ones((8192, 8192), cupy.float16)
    tensor_ms = timing.median_ms(lambda: a @ a)
    launches = 1000

    def many_empty():
        for _ in range(launches):
            empty((1,), (32,), ())

    return {
        "dram_read": read_rate(2 << 30, 1),
        "l2_read": read_rate(16 << 20, 64),
        "exp2_per_sm": per_sm(exps, 4096, 8),
        "fma_per_sm": per_sm(fmas, 4096, 8),
        "tensor_fp16": 2 * 8192**3 / (tensor_ms / 1e3),
        "launch_seconds": timing.median_ms(many_empty) / 1e3 / launches,
    }


def main(argv=None) -> None:
    from gpu.lab import results

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: python -m gpu.lab.calibrate OUT.json")
    path = args[0]
    record = {
        "kind": "calibration",
        "env": results.environment(f"python -m gpu.lab.calibrate {path}"),
        "rates": calibrate(),
    }
    Path(path).write_text(json.dumps(record, indent=1))
    print(json.dumps(record["rates"], indent=1))


if __name__ == "__main__":
    main()
