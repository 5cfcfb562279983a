"""Calibrate the machine model's rates on this GPU: `python -m gpu.lab.calibrate OUT.json`.

Each rate is the median of CUDA-event timings of one small kernel that does nothing else:
  dram_read   bytes/s reading a 2 GiB buffer once (16-byte loads), far larger than L2;
  l2_read     bytes/s reading a 16 MiB buffer 64 times (it stays in L2; loads that bypass L1);
  exp2        ex2.approx.f32 per second per SM (the MUFU), 8 independent chains per thread;
  fma         fp32 FMAs per second per SM (the FMA pipes), 8 independent chains per thread;
  tensor      fp16 FLOP/s of cuBLAS on 8192³ (wgmma on Hopper): the tensor rate a kernel can reach;
  launch      seconds per launch of an empty kernel, launched back to back;
  l2_atomic   bytes/s of float32 additions L2 absorbs: red.global.add.v2.f32 into a 16 MiB buffer (it stays in
              L2) 16 times, each warp's lanes on 8 rows × 32 bytes as rung 5 adds dQ_i;
  l2_bulk_reduce  bytes/s of float32 additions by TMA reduce-adds (cp.reduce.async.bulk.tensor, sm_90a only: 0
              elsewhere) into the same 16 MiB, 16 times, as rung 7 adds dQ_i: one thread per warpgroup adds its
              (64, 64) float32 SRAM tile in two (64, 32) boxes of 128-byte swizzled rows, through rung 7's own
              tensor map (gpu.tma.accumulator_map), every SM's two warpgroups at once;
  latencies   backward rung 7's latencies in SM clocks (wgmma groups, turns, stages: gpu.lab.rung7_latencies; its
              fences: gpu.lab.rung7_fences;
              the reduce-adds' with the microbenchmark above), sm_90a only;
  host        seconds of host work per public call (`host_seconds`, "forward 6", "backward 7", …): the call timed
              back to back on a shape whose kernels take a few µs (1 × 1 heads, N = 128, d = 64, fp16), so the
              host's checks, allocations and launches set the pace.
`sim.machine.hardware.calibrated(preset, recording)` applies the rates to a preset; `sim.machine.timing.per_call`
the host work to a predicted call.
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
extern "C" __global__ void adds(float* acc, int rows, int reps) {
    // as add_dq does: lane (g, t) adds floats 2t, 2t + 1 of each 8-column piece of row g of its warp's 8 rows
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, warps = gridDim.x * blockDim.x / 32;
    for (int r = 0; r < reps; ++r)
        for (int w = warp; w < rows / 8; w += warps) {
            float* row = acc + (size_t)(8 * w + g) * 128 + 2 * t;
            for (int n = 0; n < 16; ++n) {
#if __CUDA_ARCH__ >= 900
                asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(row + 8 * n), "f"(1.f), "f"(1.f) : "memory");
#else
                atomicAdd(row + 8 * n, 1.f);
                atomicAdd(row + 8 * n + 1, 1.f);
#endif
            }
        }
}
"""
REDUCE_SOURCE = r"""
typedef unsigned int u32;
struct __align__(64) TensorMap { unsigned long long opaque[16]; };  // CUtensorMap, as in hopper.cuh
// as reduce_dq in 07_flash2_backward_wgmma.cu: each warpgroup's thread 0 adds its (64, 64) float32 tile from SRAM
// into the accumulator (planes, rows, 128), two (64, 32) boxes per tile, tiles taken in turn by every warpgroup
// `gap`: SM clocks each warpgroup idles after each wait (rung 7's load: one add a warpgroup a step), not counted
extern "C" __global__ void reduces(const __grid_constant__ TensorMap map, int planes, int rows, int reps, int in_flight,
                                   int gap, long long* clocks) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 base = ((u32)__cvta_generic_to_shared(smem) + 1023) & ~1023u, wg = threadIdx.x / 128;
    const u32 tile = base + wg * 64 * 64 * 4;
    for (int e = threadIdx.x % 128; e < 64 * 64; e += 128)
        asm volatile("st.shared.f32 [%0], %1;" ::"r"(tile + 4 * e), "f"(1.f) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x % 128 != 0) return;
    const int tiles = planes * (rows / 64) * 2, wgs = gridDim.x * (blockDim.x / 128);
    const long long start = clock64();
    int count = 0;
    for (int r = 0; r < reps; ++r)
        for (int w = blockIdx.x * (blockDim.x / 128) + wg; w < tiles; w += wgs) {
            const int half = w % 2, row = (w / 2) % (rows / 64) * 64, plane = w / 2 / (rows / 64);
            for (int b = 0; b < 2; ++b)
                asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.bulk_group [%0, {%2, %3, %4}], [%1];"
                             ::"l"((unsigned long long)&map), "r"(tile + b * 64 * 128), "r"(64 * half + 32 * b),
                             "r"(row), "r"(plane) : "memory");
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
            if (in_flight)
                asm volatile("cp.async.bulk.wait_group.read 4;" ::: "memory");  // a few tiles in flight, as SRAM allows
            else  // rung 7's thread waits for its tile to have been read before writing it again
                asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
            ++count;
            for (const long long until = clock64() + gap; clock64() < until;) {
            }
        }
    if (!in_flight) clocks[blockIdx.x * 2 + wg] = (clock64() - start) / max(count, 1) - gap;
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");  // every addition done before SRAM is released
}
"""
REDUCE_SMEM = 1024 + 2 * 64 * 64 * 4  # alignment for the swizzle, two warpgroups' (64, 64) float32 tiles
REDUCE_GAPS = (2000, 4000)  # SM clocks between one warpgroup's reduce-adds (rung 7: one a step, ~4000–5000 clocks)
HOST_SHAPE = {"batch": 1, "heads": 1, "n": 128, "d": 64}  # kernels of a few µs: the host's work shows


def calibrate() -> dict:
    """Every rate of the module docstring, measured on the current device."""
    from gpu import device
    from gpu.lab import timing

    cupy = device.require()
    sms = device.properties()["sm_count"]
    mod = cupy.RawModule(code=SOURCE)
    stream, exps, fmas, empty, adds = (mod.get_function(n) for n in ("stream", "exps", "fmas", "empty", "adds"))
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

    acc, reps = cupy.zeros((16 << 20) // 4, cupy.float32), 16
    rows = acc.size // 128
    added_ms = timing.median_ms(lambda: adds(grid, block, (acc, cupy.int32(rows), cupy.int32(reps))))

    return {
        "l2_atomic": acc.nbytes * reps / (added_ms / 1e3),
        "l2_bulk_reduce": bulk_reduce_rate(acc.reshape(1, 32, -1, 128), reps) if device.capability() == "9.0" else 0.0,
        "dram_read": read_rate(2 << 30, 1),
        "l2_read": read_rate(16 << 20, 64),
        "exp2_per_sm": per_sm(exps, 4096, 8),
        "fma_per_sm": per_sm(fmas, 4096, 8),
        "tensor_fp16": 2 * 8192**3 / (tensor_ms / 1e3),
        "launch_seconds": timing.median_ms(many_empty) / 1e3 / launches,
    }


def _reduces(acc, reps: int, in_flight: int, gap: int = 0):
    """(launch, clocks): a zero-argument launch of REDUCE_SOURCE's `reduces` over `acc` (1, planes, rows, 128)
    float32 on every SM (`in_flight` 1: the adds left in flight, as a rate; 0: each waited for), and the int64 array
    its warpgroups write their clocks into."""
    from gpu import device, tma

    cupy = device.require()
    fn = cupy.RawModule(code=REDUCE_SOURCE, options=("--std=c++17", "-arch=sm_90a")).get_function("reduces")
    fn.max_dynamic_shared_size_bytes = REDUCE_SMEM
    _, planes, rows, _ = acc.shape
    sms = device.properties()["sm_count"]
    clocks = cupy.zeros(2 * sms, cupy.int64)
    args = (tma.accumulator_map(acc, 64), *map(cupy.int32, (planes, rows, reps, in_flight, gap)), clocks)
    return (lambda: fn((sms,), (256,), args, shared_mem=REDUCE_SMEM)), clocks


def bulk_reduce_rate(acc, reps: int) -> float:
    """Bytes/s TMA reduce-adds add into `acc` (1, planes, rows, 128) float32, resident in L2, `reps` times over."""
    from gpu.lab import timing

    launch, _ = _reduces(acc, reps, 1)
    return acc.nbytes * reps / (timing.median_ms(launch) / 1e3)


def reduce_clocks(acc, reps: int, gap: int = 0) -> float:
    """SM clocks from one warpgroup's TMA reduce-add of its (64, 64) float32 tile to the wait for its reads
    (`cp.async.bulk.wait_group.read 0`, as rung 7's thread waits before writing its tile again), every SM's two
    warpgroups adding at once into `acc` (each idling `gap` clocks after each wait); the median over the
    warpgroups."""
    from gpu import device

    launch, clocks = _reduces(acc, reps, 0, gap)
    for _ in range(2):  # the first launch warms up; the second is read
        launch()
    return float(device.require().median(clocks))


def rung7_reduce_clocks() -> dict:
    """{"reduce_clocks": …, "reduce_clocks_spaced": {gap: …}} on sm_90a (gpu.lab.rung7_latencies' module
    docstring; spaced: each warpgroup idle REDUCE_GAPS clocks between its adds, nearer rung 7's own load), {}
    elsewhere."""
    from gpu import device

    cupy = device.require()
    if device.capability() != "9.0":
        return {}
    acc = cupy.zeros((1, 32, (16 << 20) // 4 // 32 // 128, 128), cupy.float32)
    return {
        "reduce_clocks": reduce_clocks(acc, 16),
        "reduce_clocks_spaced": {str(gap): reduce_clocks(acc, 4, gap) for gap in REDUCE_GAPS},
    }


def host_seconds() -> dict[str, float]:
    """Seconds per public call on HOST_SHAPE, back to back, for each rung that runs on this GPU at d = 64."""
    from functools import partial

    from gpu import device, registry
    from gpu.backward import flash_attention_backward
    from gpu.flash import flash_attention
    from gpu.lab import timing
    from gpu.lab.checks import random_like, random_qkv

    cc, g = device.capability(), HOST_SHAPE
    q, k, v = random_qkv(g["batch"], g["heads"], g["n"], g["n"], g["d"], "float16", seed=0)
    o, lse = flash_attention(q, k, v, return_lse=True)
    do = random_like(q, 1)
    calls = {f"forward {r}": partial(flash_attention, q, k, v, kernel=r) for r, spec in registry.FORWARD.items()
             if spec.fits(g["d"], cc) is None}  # fmt: skip
    calls |= {f"backward {r}": partial(flash_attention_backward, q, k, v, o, lse, do, kernel=r)
              for r, spec in registry.BACKWARD.items() if spec.fits(g["d"], cc) is None}  # fmt: skip
    return {name: timing.median_ms(fn) / 1e3 for name, fn in calls.items()}


USAGE = "usage: python -m gpu.lab.calibrate OUT.json (on a GPU)"


def main(argv=None) -> None:
    from gpu import device
    from gpu.lab import results, rung7_fences, rung7_latencies

    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["--help"], ["-h"]):
        print(USAGE)
        return
    if len(args) != 1 or args[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        sys.exit(2)
    path = args[0]
    try:
        record = {
            "kind": "calibration",
            "env": results.environment(f"python -m gpu.lab.calibrate {path}"),
            "rates": calibrate(),
            "latencies": rung7_latencies.latencies() | rung7_fences.latencies() | rung7_reduce_clocks(),
            "host_shape": HOST_SHAPE,
            "host_seconds": host_seconds(),
        }
    except device.GPUUnavailableError as e:
        sys.exit(f"calibrate: {e}")
    Path(path).write_text(json.dumps(record, indent=1))
    print(json.dumps({k: record[k] for k in ("rates", "latencies", "host_seconds")}, indent=1))


if __name__ == "__main__":
    main()
