"""How much L2 holds, by who touches a line: a buffer of X bytes touched PASSES times over, DRAM bytes per pass
(ncu), for X across 25 MiB (one of the H100's two L2 halves) and 50 MiB (both). Issue 22, run 41-dram12.

Four ways to touch it, one kernel each, 132 thread blocks (one an SM), every pass in the same order:
- `shared_reads`: every block reads the whole buffer (as K_j, V_j in the forward, Q_i, dO_i in the backward: lines
  that SMs on both sides of L2 read);
- `private_reads`: block b reads its own 1/132 of it, every pass the same part (a line one SM reads);
- `private_adds`: block b adds 1.0f into each float of its own part (red.global.add.f32), every pass;
- `shared_adds`: pass p, block b adds into part (b + 37p) mod 132 (as dQ_i's reduce-adds from every block of a
  head: a line added into by SMs on both sides).
With L2 flushed before each launch (ncu --cache-control all) the first pass misses everything; a cache that keeps
X re-reads nothing after it, a cache too small re-reads up to all of it each pass: misses per pass after the first
= (DRAM read − X) / ((PASSES − 1) X).

`ncu --cache-control all --csv --metrics dram__bytes_read.sum,… python -m gpu.lab.l2_capacity run` launches them all
(X = SIZES MiB, in that order, modes in MODES' order); `python -m gpu.lab.l2_capacity table NCU.csv` prints the
misses per pass.
"""

import sys

PASSES = 5
BLOCKS = 132
THREADS = 1024
SIZES = (8, 16, 20, 22, 24, 26, 28, 32, 36, 40, 48, 56, 64)  # MiB
MODES = ("shared_reads", "private_reads", "private_adds", "shared_adds")
SOURCE = r"""
extern "C" __global__ void shared_reads(const int4* __restrict__ buf, long long n, int passes, int* sink) {
    int acc = 0;
    for (int p = 0; p < passes; ++p)
        for (long long i = threadIdx.x; i < n; i += blockDim.x) {
            const int4 v = __ldcg(buf + i);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    if (acc == 0x7fffffff) sink[blockIdx.x] = acc;
}
extern "C" __global__ void private_reads(const int4* __restrict__ buf, long long n, int passes, int* sink) {
    const long long part = n / gridDim.x, at = blockIdx.x * part;
    int acc = 0;
    for (int p = 0; p < passes; ++p)
        for (long long i = threadIdx.x; i < part; i += blockDim.x) {
            const int4 v = __ldcg(buf + at + i);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    if (acc == 0x7fffffff) sink[blockIdx.x] = acc;
}
extern "C" __global__ void private_adds(float* buf, long long n, int passes, int* sink) {
    const long long part = n / gridDim.x, at = blockIdx.x * part;
    for (int p = 0; p < passes; ++p)
        for (long long i = threadIdx.x; i < part; i += blockDim.x)
            asm volatile("red.global.add.f32 [%0], %1;" :: "l"(buf + at + i), "f"(1.0f) : "memory");
}
extern "C" __global__ void shared_adds(float* buf, long long n, int passes, int* sink) {
    const long long part = n / gridDim.x;
    for (int p = 0; p < passes; ++p) {
        const long long at = ((blockIdx.x + 37 * p) % gridDim.x) * part;
        for (long long i = threadIdx.x; i < part; i += blockDim.x)
            asm volatile("red.global.add.f32 [%0], %1;" :: "l"(buf + at + i), "f"(1.0f) : "memory");
    }
}
"""


def run() -> None:
    """Every mode at every size, one launch each (the program ncu profiles)."""
    import cupy

    module = cupy.RawModule(code=SOURCE, options=("--std=c++17",))
    sink = cupy.zeros(BLOCKS, cupy.int32)
    for mode in MODES:
        fn = module.get_function(mode)
        for mib in SIZES:
            buf = cupy.zeros(mib << 20, cupy.uint8)
            n = buf.nbytes // (4 if mode.endswith("adds") else 16)
            fn((BLOCKS,), (THREADS,), (buf, cupy.int64(n), cupy.int32(PASSES), sink))
            cupy.cuda.Device().synchronize()
            del buf


def table(path: str) -> None:
    from gpu.lab.check_model import profiled_rows

    with open(path) as f:
        rows = profiled_rows(f.read().splitlines())
    plan = [(mode, mib) for mode in MODES for mib in SIZES]
    if len(rows) != len(plan):
        sys.exit(f"l2_capacity: {len(rows)} launches profiled, {len(plan)} planned")
    print("mode           X MiB   DRAM read MB   write MB  misses a pass after the first  L2 hit %")
    for (mode, mib), r in zip(plan, rows, strict=True):  # X, a buffer, in MiB; the bytes DRAM moved in MB
        read, write, size = r["dram__bytes_read.sum"], r["dram__bytes_write.sum"], mib << 20
        misses = (read - size) / ((PASSES - 1) * size)
        hit = r.get("lts__t_sector_hit_rate.pct", 0)
        print(f"{mode:14s} {mib:5d} {read / 1e6:14.1f} {write / 1e6:10.1f} {misses:30.3f} {hit:9.1f}")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["run"]:
        run()
    elif len(argv) == 2 and argv[0] == "table":
        table(argv[1])
    else:
        print("usage: python -m gpu.lab.l2_capacity run (on a GPU, under ncu) | table NCU.csv")
        sys.exit(2)


if __name__ == "__main__":
    main()
