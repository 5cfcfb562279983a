"""What one thread block of backward rung 7's main kernel costs beside its steps, measured once per GPU.

A block (one K/V block j) makes Tr steps (one per Q block i), and around them: its setup (shared memory's
mbarriers, the producer's first copies of K_j, V_j and the first stages, whose latency nothing hides), the dQ
product issued at it = 0 on the unwritten dS buffer and thrown away (07_flash2_backward_wgmma.cu, "run 37-bwd3"),
the last Q block's dQ product after the loop, the wait for its last reduce-adds, dK_j and dV_j scaled and stored
from registers, and its exit before the next block takes the SM. The model books the first loads and last stores
at the SM's share of DRAM and L2 bandwidth (`sim.machine.timing`, "fill") and nothing else per block; at N = 1024
a block makes 8 steps (d = 64), so what a block costs beside them is a large share of its time.

The probe: the main kernel alone under ncu (`--cache-control all`: L2 flushed before each launch, as check_model
profiles it), full, fp16, one wave (batch 1, ⌊SMs / Tc⌋ heads: every block on an SM of its own, the kernel's time
one block's) at N = 128 · 2^k, so each block makes Tr = N / Br steps, 1 … 32 at d = 64 (Br = 128), 2 … 64 at d = 128
(Br = 64); each shape LAUNCHES times. Per launch: ncu's kernel time and SM clock (cycles = time × clock) and the
shared-memory wavefronts of the whole grid (l1tex__data_pipe_lsu_wavefronts_mem_shared.sum), per block.
`fit` takes, per d, the least-squares line cycles = a + b · Tr and wavefronts a block = c + e · Tr over the
shapes: b, e the step's, a and c the block's own (the launch's start and end inside ncu's time included in a);
`block_clocks` is a less what the model already books per block (`Hardware.block_clocks`).

The SMs' paces: `python -m gpu.lab.rung7_blocks paces DIR` reads the stamps `gpu.lab.block_stamps run DIR` made (rung 7's
main kernel at d = 128, N = 16384, full, 8 × 16: 16,384 blocks, 123–126 on each SM) and gives each SM's mean block
time and their spread (standard deviation over mean: `Hardware.sm_pace_spread`, which `sim.machine.l2.paced` plays).

On the GPU: `python -m gpu.lab.rung7_blocks run OUT_DIR` (runs ncu over `… rung7_blocks launches`; writes ncu.csv
and blocks.json into OUT_DIR). Anywhere: `python -m gpu.lab.rung7_blocks fit OUT_DIR/blocks.json` (the H100's:
gpu/lab/results/rung7-blocks-h100.json).
"""

import json
import subprocess
import sys
from pathlib import Path

SMS = 132  # H100 SXM
NS = (128, 256, 512, 1024, 2048, 4096)
DS = (64, 128)
LAUNCHES = 3
METRICS = ("gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,"
           "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_active")  # fmt: skip


def shapes() -> list[dict]:
    """Each probed shape: d, N, heads (one wave), Br and the steps a block makes."""
    from gpu import registry

    out = []
    for d in DS:
        for n in NS:
            t = registry.BACKWARD[7].tiles_for(d, n, False)
            tc = -(-n // t.block_cols)
            out.append({"d": d, "n": n, "heads": SMS // tc, "blocks": SMS // tc * tc, "br": t.block_rows,
                        "steps": -(-n // t.block_rows)})  # fmt: skip
    return out


def launches() -> None:
    """The launches ncu profiles: for each shape, the forward (not profiled) then the backward LAUNCHES times."""
    from gpu.backward import flash_attention_backward
    from gpu.flash import flash_attention
    from gpu.lab.checks import random_like, random_qkv

    for g in shapes():
        q, k, v = random_qkv(1, g["heads"], g["n"], g["n"], g["d"], "float16", seed=0)
        o, lse = flash_attention(q, k, v, kernel=6, return_lse=True)
        do = random_like(q, 1)
        for _ in range(LAUNCHES):
            flash_attention_backward(q, k, v, o, lse, do, kernel=7)


def run(out_dir: str) -> None:
    """ncu over `launches` (the main kernel only); ncu.csv and blocks.json (each launch's counters by shape)."""
    from gpu import registry
    from gpu.lab import counters, results
    from gpu.lab.check_model import profiled_rows

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cmd = [counters.ncu_path(), "--clock-control", "none", "--cache-control", "all", "--csv", "--print-units", "base",
           "--kernel-name", f"regex:^{registry.BACKWARD[7].function}$", "--metrics", METRICS,
           sys.executable, "-m", "gpu.lab.rung7_blocks", "launches"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    (out / "ncu.csv").write_text(done.stdout)
    rows = profiled_rows([x for x in done.stdout.splitlines() if x.startswith('"')])
    plan = [g for g in shapes() for _ in range(LAUNCHES)]
    if len(rows) != len(plan):
        sys.exit(f"rung7_blocks: ncu profiled {len(rows)} launches, not {len(plan)}: {done.stderr[-2000:]}")
    record = {"kind": "rung7-blocks", "env": results.environment(f"python -m gpu.lab.rung7_blocks run {out_dir}"),
              "launches": [{**g, **r} for g, r in zip(plan, rows, strict=True)]}  # fmt: skip
    (out / "blocks.json").write_text(json.dumps(record, indent=1))


def line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b·x: (a, b)."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def fit(record: dict) -> dict:
    """Per d: {"block_cycles", "step_cycles", "block_wavefronts", "step_wavefronts"} (the lines' a, b, c, e) and each
    shape's medians: cycles, wavefronts a block and the line's residual."""
    import statistics

    out = {}
    for d in DS:
        mine = [r for r in record["launches"] if r["d"] == d]
        shapes_d = sorted({(r["n"], r["steps"], r["blocks"]) for r in mine})
        med = []
        for n, steps, blocks in shapes_d:
            rs = [r for r in mine if r["n"] == n]
            cycles = statistics.median(r["gpu__time_duration.sum"] * 1e-9 * r["sm__cycles_elapsed.avg.per_second"]
                                       for r in rs)  # fmt: skip
            waves = statistics.median(r["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] for r in rs) / blocks
            med.append((n, steps, cycles, waves))
        a, b = line([m[1] for m in med], [m[2] for m in med])
        c, e = line([m[1] for m in med], [m[3] for m in med])
        out[str(d)] = {"block_cycles": a, "step_cycles": b, "block_wavefronts": c, "step_wavefronts": e,
                       "shapes": [{"n": n, "steps": s, "cycles": cy, "wavefronts": w, "residual": cy - a - b * s}
                                  for n, s, cy, w in med]}  # fmt: skip
    return out


def block_clocks(record: dict, hw) -> dict[str, float]:
    """`Hardware.block_clocks` from a recording: per d, the line's intercept (cycles) less `hw`'s launch and the fill
    the model books for a block (its first loads at the SM's share of DRAM bandwidth, its dK_j, dV_j at its share
    of L2's: `sim.machine.timing`), both at the median SM clock of that d's launches; keyed as rung 7's program
    stages ("d64 br128")."""
    import statistics

    from gpu import registry
    from sim.machine.grids import flash2_backward

    lines, out = fit(record), {}
    for d in DS:
        t = registry.BACKWARD[7].tiles_for(d, NS[0], False)
        block = flash2_backward(NS[0], NS[0], d, 2, t.block_rows, t.block_cols)[1].blocks[0]
        fill = block.prologue * hw.sm_count / hw.hbm_bandwidth + block.epilogue * hw.sm_count / hw.l2_bandwidth
        clock = statistics.median(r["sm__cycles_elapsed.avg.per_second"] for r in record["launches"] if r["d"] == d)
        out[f"d{d} br{t.block_rows}"] = lines[str(d)]["block_cycles"] - (hw.launch_seconds + fill) * clock
    return out


def sm_means(stamps) -> list[float]:
    """Each SM's mean block time (µs) in one stamped launch of rung 7's main kernel (gpu.lab.block_stamps: a block's
    start and end stamps, the SM it ran on), by SM id."""
    from gpu.lab.block_stamps import decoded

    slot, t, sm, *_ = decoded(stamps)
    at, where = dict(zip(slot.tolist(), t.tolist(), strict=True)), dict(zip(slot.tolist(), sm.tolist(), strict=True))
    times: dict[int, list[float]] = {}
    for x in range(len(slot) // 2):
        times.setdefault(where[2 * x], []).append((at[2 * x + 1] - at[2 * x]) / 1e3)
    return [sum(v) / len(v) for _, v in sorted(times.items())]


def spread(means: list[float]) -> float:
    """The standard deviation of the SMs' mean block times over their mean (`Hardware.sm_pace_spread`)."""
    m = sum(means) / len(means)
    return (sum((x - m) ** 2 for x in means) / len(means)) ** 0.5 / m


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["launches"]:
        launches()
    elif len(argv) == 2 and argv[0] == "run":
        run(argv[1])
    elif len(argv) == 2 and argv[0] == "paces":
        import numpy as np

        stamps, plan = np.load(Path(argv[1]) / "stamps.npz"), json.loads((Path(argv[1]) / "plan.json").read_text())
        means = [sm_means(stamps[f"l{n}"]) for n, kind in enumerate(plan) if kind == "backward 7"]
        print(json.dumps({"sm_means_us": means, "spread": [spread(m) for m in means]}))
    elif len(argv) == 2 and argv[0] == "fit":
        from sim.machine.hardware import H100_SXM

        record = json.loads(Path(argv[1]).read_text())
        print(json.dumps(fit(record) | {"block_clocks (H100 preset's launch and fill)": block_clocks(record, H100_SXM)},
                         indent=1))  # fmt: skip
    else:
        print("usage: python -m gpu.lab.rung7_blocks run OUT_DIR (on a GPU, ncu) | fit BLOCKS.json | paces STAMPS_DIR")
        sys.exit(2)


if __name__ == "__main__":
    main()
