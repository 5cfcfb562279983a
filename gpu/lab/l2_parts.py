"""L2 as its parts (gpu/NOTES.md run 41-model11): ncu's L2 utilization (lts__throughput) is the busiest of L2's parts
(its `breakdown:`), each loaded by every kind of work (`sim.machine.hardware.L2_WORK`) at its own cost per byte.

On a GPU, `python -m gpu.lab.l2_parts` launches each of LOOPS once, the program `python -m gpu.lab.check_model parts`
hands ncu; each loop does one or two kinds of work. Anywhere: `part_costs` fits each part's cost per byte of each kind
to the loops' utilizations (`sim.machine.hardware.H100_L2_PARTS` holds the H100's), `prefetch_costs` each part's
cost per byte of rung 6's prefetch of Q_i from launches of the kernel with and without it (gpu.lab.l2_tags pairs),
`parts_table` sets the parts a kernel's work loads at those costs beside ncu's (`python -m gpu.lab.check_model
parts-report RECORD [PAIRS]`).
"""

import json

from gpu import registry
from gpu.lab.calibrate import SOURCE, _reduces
from gpu.lab.check_report import l2_counts
from gpu.lab.predict import launch_of
from sim.machine.hardware import L2_WORK
from sim.machine.prediction import EXACT_HEADS, crossing_reads, kernels_of

LOOP_SOURCE = r"""
extern "C" __global__ void stream_shared(const int4* __restrict__ x, long long n, int readers, int* out) {
    // each line read once by `readers` blocks a grid / readers apart in the launch order (on SMs of either L2 half)
    const int groups = gridDim.x / readers, group = blockIdx.x % groups;
    int acc = 0;
    for (long long i = group * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)groups * blockDim.x) {
        int4 v = __ldcg(x + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff) out[0] = acc;
}
extern "C" __global__ void stores(unsigned* x, long long rows, int reps) {
    // as rung 7 stores dK_j, dV_j (07_flash2_backward_wgmma.cu, line 18): lane (g, t) stores 4 bytes at byte 4t of
    // each 16-byte piece n of row g of its warp's 8 rows (128-byte rows: d = 64, fp16), one 32-bit store each
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32, warps = (long long)gridDim.x * blockDim.x / 32;
    for (int r = 0; r < reps; ++r)
        for (long long w = warp; w < rows / 8; w += warps) {
            unsigned* row = x + (8 * w + g) * 32 + t;
            for (int n = 0; n < 8; ++n)
                asm volatile("st.global.b32 [%0], %1;" ::"l"(row + 4 * n), "r"(r ^ n) : "memory");
        }
}
extern "C" __global__ void stores_wide(int4* x, long long n, int reps) {
    // 16 bytes a lane, a warp's 512 contiguous bytes (store_16 in common.cuh: the backward's passes, rung 6's O_i)
    for (int r = 0; r < reps; ++r)
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
            asm volatile("st.global.v4.b32 [%0], {%1, %1, %1, %1};" ::"l"(x + i), "r"(r) : "memory");
}
"""
# each loop: its name, the kernel it launches (calibrate's `stream` and `reduces`, LOOP_SOURCE's), bytes, passes (or
# blocks reading each line); it moves bytes of one kind (KIND_OF), and ncu adds the lines L2 fills from DRAM and writes
# back. Two read loops over 16 MiB (8 and 64 passes) part the reads' cost from the fills', the 2 GiB loops (once) the
# fills' and write-backs' from the rest; lines read by 1, 2 or 4 blocks (crossing L2's halves for 1 − 2^−readers of
# their bytes) the fills' from the crossings'
LOOPS = (
    ("read 16 MiB × 64", "stream", 16 << 20, 64),
    ("read 16 MiB × 8", "stream", 16 << 20, 8),
    ("read 2 GiB × 1", "stream", 2 << 30, 1),
    ("read 1 GiB by 2 blocks", "stream_shared", 1 << 30, 2),
    ("read 1 GiB by 4 blocks", "stream_shared", 1 << 30, 4),
    ("store pieces 16 MiB × 16", "stores", 16 << 20, 16),
    ("store wide 16 MiB × 16", "stores_wide", 16 << 20, 16),
    ("store wide 2 GiB × 1", "stores_wide", 2 << 30, 1),
    ("reduce-add 16 MiB × 16", "reduces", 16 << 20, 16),
)
KIND_OF = {"stream": "read", "stream_shared": "read", "stores": "store_pieces", "stores_wide": "store_wide",
           "reduces": "reduced"}  # fmt: skip
H100_SMS = 132


def loops() -> list[dict]:
    """Launch each of LOOPS once (the program ncu profiles); [{name, kernel, its bytes by kind}] in launch order."""
    from gpu import device

    cupy = device.require()
    sms = device.properties()["sm_count"]
    mod = cupy.RawModule(code=SOURCE + LOOP_SOURCE)
    grid, block, out = (sms * 8,), (512,), cupy.zeros(1, cupy.int32)
    done = []
    for name, kernel, nbytes, reps in LOOPS:
        if kernel == "reduces" and device.capability() != "9.0":
            continue
        x = cupy.ones(nbytes // 4, cupy.int32)
        if kernel == "stream":
            mod.get_function(kernel)(grid, block, (x, cupy.int64(nbytes // 16), cupy.int32(reps), out))
        elif kernel == "stream_shared":  # reps: blocks reading each line, all resident at once (4 of 512 an SM)
            mod.get_function(kernel)((sms * 4,), block, (x, cupy.int64(nbytes // 16), cupy.int32(reps), out))
        elif kernel == "stores":
            mod.get_function(kernel)(grid, block, (x, cupy.int64(nbytes // 128), cupy.int32(reps)))
        elif kernel == "stores_wide":
            mod.get_function(kernel)(grid, block, (x, cupy.int64(nbytes // 16), cupy.int32(reps)))
        else:
            launch, _ = _reduces(x.view(cupy.float32).reshape(1, 32, -1, 128), reps, 1)
            launch()
        cupy.cuda.Device().synchronize()
        done.append({"name": name, "kernel": kernel, KIND_OF[kernel]: nbytes * reps})
        del x
    return done


PART_PREFIX, PART_SUFFIX = "lts__", ".avg.pct_of_peak_sustained_elapsed"
NOT_PARTS = ("lts__throughput", "lts__d_sectors_fill_sysmem", "lts__d_decomp_input_sectors")  # the max; never loaded


def part_names(row: dict) -> list[str]:
    """The parts of L2 a profiled row has, as ncu names them without prefix and suffix ("xbar2lts_cycles_active")."""
    return [k[len(PART_PREFIX) : -len(PART_SUFFIX)] for k in row
            if k.startswith(PART_PREFIX) and k.endswith(PART_SUFFIX) and k[: -len(PART_SUFFIX)] not in NOT_PARTS]  # fmt: skip


def loop_work(loop: dict) -> dict[str, float]:
    """A loop's bytes by kind: what its code moves (stores, reduce-adds; its reads' lines across L2's halves: a line
    read by r blocks crosses unless all r sit beside its home, 1 − 2^−r, as `prediction.crossing_reads` counts), and
    what ncu counted L2 hand the SMs, fill from DRAM and write back."""
    _, kernel, nbytes, reps = next(x for x in LOOPS if x[0] == loop["name"])
    crossed = nbytes * (1 - 0.5**reps) if kernel.startswith("stream") else 0.0  # each line read by `reps` blocks
    return {"read": loop["l1tex__m_xbar2l1tex_read_bytes.sum"], "fill": loop["dram__bytes_read.sum"],
            "cross_read": crossed, "write_back": loop["dram__bytes_write.sum"]} | {
            k: loop.get(k, 0) for k in ("store_pieces", "store_wide", "reduced", "prefetch")}  # fmt: skip


def nonnegative(a, b):
    """x ≥ 0 minimizing |a x − b| (Lawson and Hanson's active set)."""
    import numpy as np

    n = a.shape[1]
    free, x = np.zeros(n, bool), np.zeros(n)
    for _ in range(10 * n):
        w = a.T @ (b - a @ x)
        if free.all() or (w[~free] <= 1e-12 * np.abs(w).max()).all():
            break
        free[np.argmax(np.where(free, -np.inf, w))] = True
        while True:
            z = np.zeros(n)
            z[free] = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
            if (z[free] > 0).all():
                x = z
                break
            neg = free & (z <= 0)
            x = x + np.min(x[neg] / (x[neg] - z[neg])) * (z - x)
            free &= x > 0
    return x


def prefetch_costs(pairs: list[dict]) -> dict[str, float]:
    """{part: seconds of the part at its 100% per byte of Q_i prefetched} from rung 6's launches with and without
    the prefetch (gpu.lab.l2_tags pairs: each build several times on each shape): Σ over the shapes of the median
    busy time (part % × kernel time) with it less the median without, over Σ of the Q bytes prefetched (every
    tile's Q_i once: batch · heads · N · d · 2)."""
    import statistics

    shapes = {(r["d"], r["n"], r["causal"], r["batch"], r["heads"]) for r in pairs}
    q = sum(b * h * n * d * 2 for d, n, _, b, h in shapes)

    def busy(part: str, shape: tuple, build: str) -> float:
        return statistics.median(r[PART_PREFIX + part + PART_SUFFIX] / 100 * r["gpu__time_duration.sum"] * 1e-9
                                 for r in pairs if (r["d"], r["n"], r["causal"], r["batch"], r["heads"]) == shape
                                 and r["build"] == build)  # fmt: skip

    return {part: sum(busy(part, g, "call") - busy(part, g, "no_prefetch") for g in shapes) / q
            for part in part_names(pairs[0])}  # fmt: skip


def part_costs(loops: list[dict], pairs: list[dict] | None = None) -> dict[str, dict[str, float]]:
    """{part: {kind: seconds of the part at its 100% per byte}} from the loops: for each part, the costs ≥ 0 that
    best give each loop's utilization (its seconds at 100%, part % × the loop's time, = Σ bytes × cost), each loop
    weighted alike (its residual in points of utilization); the prefetch's, which no loop does, from rung 6's
    `pairs` (`prefetch_costs`; none given: 0)."""
    import numpy as np

    kinds = [k for k in L2_WORK if k != "prefetch"]
    prefetched = prefetch_costs(pairs) if pairs else {}
    a = np.array([[loop_work(loop)[k] for k in kinds] for loop in loops], dtype=float)
    t = np.array([loop["gpu__time_duration.sum"] * 1e-9 for loop in loops])
    rows = a / t[:, None]  # bytes a second
    scale = rows.max(axis=0)
    out = {}
    for part in part_names(loops[0]):
        y = np.array([loop[PART_PREFIX + part + PART_SUFFIX] / 100 for loop in loops])
        fit = dict(zip(kinds, map(float, nonnegative(rows / scale, y) / scale), strict=True))
        out[part] = {k: fit.get(k, prefetched.get(part, 0.0)) for k in L2_WORK}
    return out


def crossings(spec: registry.KernelSpec, g: dict) -> list[float]:
    """Each of rung `spec`'s kernels' read bytes across L2's halves on shape g (`prediction.crossing_reads`, the
    heads' tiles each their own: 16 heads at most, scaled)."""
    tiles = spec.tiles_for(g["d"], g["n"], g["causal"])
    bh = g["batch"] * g["heads"]
    h = min(bh, EXACT_HEADS)
    shape = ("flash2", g["n"], g["n"], g["d"], 2, tiles.block_rows, tiles.block_cols, g["causal"], h)
    kernels = kernels_of(*shape, spec.direction == "backward", launch_of(spec, g["d"], tiles), H100_SMS)
    return [crossing_reads(k, 2) * bh / h for k in kernels]


def parts_table(data: dict, costs: dict[str, dict[str, float]]) -> list[str]:
    """Each loop's utilization of each part against the fit; then forward 6's and rung 7's main launch on each
    shape: L2's busiest part counted (the work by kind × its cost: reads, fills, write-backs as ncu counted them, the
    stores, reduce-adds and rung 6's prefetch of Q_i from the code, `l2_counts`) against ncu's, and the parts within
    15 points of either."""
    out = ["loops, each part's % of peak measured / fitted:"]
    short = {p: p.replace("_cycles_active", "").replace("_realtime", "") for p in costs}
    for loop in data["loops"]:
        t, work = loop["gpu__time_duration.sum"] * 1e-9, loop_work(loop)
        fit = {p: 100 * sum(work[k] * c for k, c in cs.items()) / t for p, cs in costs.items()}
        out.append(f"  {loop['name']:<26} " + ", ".join(
            f"{short[p]} {loop[PART_PREFIX + p + PART_SUFFIX]:.0f}/{fit[p]:.0f}" for p in costs
            if max(fit[p], loop[PART_PREFIX + p + PART_SUFFIX]) >= 5))  # fmt: skip
    out.append(f"{'launch':<6} {'d':>3} {'N':>5} c {'B×H':>5} | ncu lts__throughput, busiest part | counted | "
               "parts counted / ncu")  # fmt: skip
    for i, g in enumerate(data.get("grid", [])):
        rows = [r for r in data.get("profiled", []) if r["shape"] == i]
        bh, n = g["batch"] * g["heads"], g["batch"] * g["heads"] * g["n"] * g["d"]
        c = l2_counts(g)
        for r in rows:
            if r["kernel"] == registry.FORWARD[6].function:
                what, own = "fwd 6", {"store_wide": 2 * n + 4 * bh * g["n"], "prefetch": 2 * n}  # O_i and L_i; Q_i
                own["cross_read"] = crossings(registry.FORWARD[6], g)[0]
            elif r["kernel"] == registry.BACKWARD[7].function:
                what, own = "bwd 7", {"store_pieces": 4 * n, "reduced": c["main"]["reduced"]}  # dK_j, dV_j; dQ_i
                own["cross_read"] = crossings(registry.BACKWARD[7], g)[1]
            else:
                continue
            work = {"read": r["l1tex__m_xbar2l1tex_read_bytes.sum"], "fill": r["dram__bytes_read.sum"],
                    "write_back": r["dram__bytes_write.sum"]} | own  # fmt: skip
            t = r["gpu__time_duration.sum"] * 1e-9
            counted = {p: 100 * sum(work.get(k, 0) * cost for k, cost in cs.items()) / t for p, cs in costs.items()}
            measured = {p: r[PART_PREFIX + p + PART_SUFFIX] for p in costs}
            top, mine = max(measured, key=measured.get), max(counted, key=counted.get)
            out.append(f"{what:<6} {g['d']:>3} {g['n']:>5} {'c' if g['causal'] else '-'} {g['batch']}×{g['heads']:<3} | "
                       f"{r['lts__throughput.avg.pct_of_peak_sustained_elapsed']:5.1f} {short[top]:<14} | "
                       f"{counted[mine]:5.1f} {short[mine]:<14} | " + ", ".join(
                           f"{short[p]} {counted[p]:.0f}/{measured[p]:.0f}" for p in costs
                           if max(counted[p], measured[p]) >= max(counted[mine], measured[top]) - 15))  # fmt: skip
    return out


if __name__ == "__main__":
    print(json.dumps(loops()))
