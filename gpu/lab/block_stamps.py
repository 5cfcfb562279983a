"""When and where thread blocks really run: a %globaltimer / %smid stamp per tile (rung 6) or per thread block (rung
7), beside ncu's DRAM bytes of the same launch (issue 22: the DRAM misses at d = 128, N = 16384, full, 8 × 16).

The kernels are not edited: `stamped` wraps `gpu.source.render` so that the source NVRTC compiles carries a
`__device__` array of stamps and one stamp call at a place named by an exact line of the kernel file —
rung 6: its producer thread as it starts a tile (once the previous tile's Q_i is used up: the tile's first copy),
rung 7: its producer thread as the block starts, its first consumer thread after its last reduce-add (before the
dK_j, dV_j stores). A stamp is two words: the time (ns) and smid << 48 | a << 24 | b (rung 6: a the plane, b the
Q block i; rung 7: a the plane, b the K/V block j).

On the GPU: `ncu --cache-control all --metrics … python -m gpu.lab.block_stamps run OUT_DIR` launches forward
rung 6 (three times on the same inputs, twice on fresh copies), backward rung 7 three times and rung 5 once (no
stamps), at that shape, saving each stamped launch's stamps to OUT_DIR/stamps.npz (array lN: the N-th launch ncu
profiled, `plan.json` names each); `… block_stamps plain` launches the unstamped builds for ncu alone. Anywhere:
`python -m gpu.lab.block_stamps replay OUT_DIR NCU.csv` plays each launch's accesses in the stamped order (the
grid's steps spread evenly between a block's stamps) against one L2 half as `sim.machine.l2.L2` (whole tiles) and
as `HeldL2` (the shares gpu.lab.l2_capacity measured) hold them, beside ncu's DRAM reads and the lockstep model's.
"""

import json
import sys
from pathlib import Path

import numpy as np

from sim.machine.l2 import HeldL2

SLOTS = 40_000  # stamps: 132 blocks × 256 tiles (rung 6), 2 × 16384 thread blocks (rung 7)
SHAPE = {"batch": 8, "heads": 16, "n": 16384, "d": 128, "causal": False}
PLAIN_SHAPES = (  # the shape's neighbours on issue 22's grid (1 × 16 heads; causal), then the shape itself, last
    {**SHAPE, "batch": 1},
    {**SHAPE, "causal": True},
    SHAPE,
)
HEADER = f"""
__device__ unsigned long long STAMPS[2 * {SLOTS}];
__device__ __forceinline__ void stamp(int slot, unsigned a, unsigned b) {{
    unsigned long long t;
    unsigned sm;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    if (slot < {SLOTS}) {{
        STAMPS[2 * slot] = t;
        STAMPS[2 * slot + 1] = ((unsigned long long)sm << 48) | ((unsigned long long)a << 24) | b;
    }}
}}
"""
# (kernel file, an exact line of it, the stamp put before it)
PLACES = {
    "06_flash2_wgmma_tma.cu": [
        ("            mbar_expect_tx(q_full, TILE_Q);\n", "            stamp(blockIdx.x * 256 + tiles - 1, plane, i);\n"),
    ],
    "07_flash2_backward_wgmma.cu": [
        ("            mbar_expect_tx(KV_FULL, 2 * TILE_KV);\n",
         "            stamp(2 * (blockIdx.y * gridDim.x + blockIdx.x), blockIdx.y, blockIdx.x);\n"),
        ("    // line 18: dK_j = τ dK_j and dV_j to HBM, straight from registers (zeros for keys no query sees)\n",
         "    if (threadIdx.x == 128) stamp(2 * (blockIdx.y * gridDim.x + blockIdx.x) + 1, blockIdx.y, blockIdx.x);\n"),
    ],
}  # fmt: skip


def patch(file: str, text: str) -> str:
    """`text` (a rendered kernel file) with the stamp array and the stamps of PLACES[file]."""
    for line, added in PLACES.get(file, ()):
        if text.count(line) != 1:
            raise SystemExit(f"block_stamps: {file} no longer has exactly one line {line.strip()!r}")
        text = text.replace(line, added + line)
    return HEADER + text if file in PLACES else text


def stamped():
    """Make gpu.source compile the stamped kernels; returns {file: module} as they are built."""
    from gpu import source

    render, module, made = source.render, source._module, {}

    def patched_render(file, defines):
        return patch(file, render(file, defines))

    def recorded(file, items, arch):
        made[file] = module(file, items, arch)
        return made[file]

    source.render, source._module = patched_render, recorded
    return made


def run(out: Path) -> None:
    """The launches ncu profiles (forward rung 6 on the same inputs, then on fresh copies; backward rung 7), each
    launch's stamps saved; plan.json lists ncu's kernels in order with the stamps file of each."""
    import cupy

    from gpu.backward import flash_attention_backward
    from gpu.flash import flash_attention
    from gpu.lab.checks import random_like, random_qkv

    out.mkdir(parents=True, exist_ok=True)
    made = stamped()
    s = SHAPE
    q, k, v = random_qkv(s["batch"], s["heads"], s["n"], s["n"], s["d"], "float16", seed=0)
    do = random_like(q, 1)
    plan, saved = [], {}

    def take(kind: str, file: str | None) -> None:
        cupy.cuda.Device().synchronize()
        if file:
            buf = cupy.ndarray((2 * SLOTS,), cupy.uint64, memptr=made[file].get_global("STAMPS"))
            saved[f"l{len(plan)}"] = buf.get()
            buf.fill(0)
            np.savez_compressed(out / "stamps.npz", **saved)
        plan.append(kind)
        (out / "plan.json").write_text(json.dumps(plan))

    fwd, bwd = "06_flash2_wgmma_tma.cu", "07_flash2_backward_wgmma.cu"
    for _ in range(3):
        o, lse = flash_attention(q, k, v, causal=s["causal"], kernel=6, return_lse=True)
        take("forward 6, same inputs", fwd)
    kept = []
    for seed in (1, 2):  # fresh arrays: other addresses (the old ones stay allocated)
        kept.append(random_qkv(s["batch"], s["heads"], s["n"], s["n"], s["d"], "float16", seed=seed))
        flash_attention(*kept[-1], causal=s["causal"], kernel=6)
        take(f"forward 6, fresh inputs {seed}", fwd)
    del kept
    for _ in range(3):
        flash_attention_backward(q, k, v, o, lse, do, causal=s["causal"], kernel=7)
        take("backward 7", bwd)
    flash_attention_backward(q, k, v, o, lse, do, causal=s["causal"], kernel=5)
    take("backward 5", None)


def plain() -> None:
    """The unstamped builds, for ncu alone: forward rung 6 three times on each of PLAIN_SHAPES, then backward rung 7
    three times on SHAPE (ncu's kernels in that order)."""
    from gpu.backward import flash_attention_backward
    from gpu.flash import flash_attention
    from gpu.lab.checks import random_like, random_qkv

    for g in PLAIN_SHAPES:
        q, k, v = random_qkv(g["batch"], g["heads"], g["n"], g["n"], g["d"], "float16", seed=0)
        for _ in range(3):
            o, lse = flash_attention(q, k, v, causal=g["causal"], kernel=6, return_lse=True)
    do = random_like(q, 1)
    for _ in range(3):
        flash_attention_backward(q, k, v, o, lse, do, causal=SHAPE["causal"], kernel=7)


HELD = {"shared": 1.0, "private": 25 / 40, "add": 25 / 50, "write": 25 / 50}  # sim.machine.l2.HeldL2, one half


def kernels() -> tuple:
    """Forward rung 6's persistent kernel and backward rung 7's main kernel at SHAPE, as the model builds them."""
    from gpu import registry
    from gpu.lab.predict import launch_of
    from sim.machine.hardware import H100_SXM
    from sim.machine.prediction import kernels_of

    s, out = SHAPE, []
    for table, rung, backward in ((registry.FORWARD, 6, False), (registry.BACKWARD, 7, True)):
        spec = table[rung]
        t = spec.tiles_for(s["d"], s["n"], s["causal"])
        shape = ("flash2", s["n"], s["n"], s["d"], 2, t.block_rows, t.block_cols, s["causal"], s["batch"] * s["heads"])
        ks = kernels_of(*shape, backward, launch_of(spec, s["d"], t), H100_SXM.sm_count)
        out.append(ks[1] if backward else ks[0])
    return tuple(out)


def schedule(kernel, stamps: np.ndarray, backward: bool) -> list[tuple]:
    """(time, block, step) of every step of `kernel`, in time order: a block's steps spread evenly between its
    stamps (rung 6: a tile's between its start and the next tile's, the last tile as long as the block's median tile
    (a block of one tile: every block's), each
    tile the one its stamp names — the static walk's or whichever the tickets gave; rung 7: between the block's start
    and end)."""
    slot, t, _, plane, i = decoded(stamps)
    events = []
    if backward:  # slots 2x, 2x + 1: block x's start and end
        at = dict(zip(slot.tolist(), t.tolist(), strict=True))
        for x, block in enumerate(kernel.blocks):
            steps = list(block.steps())
            span = (at[2 * x + 1] - at[2 * x]) / max(1, len(steps) - 1)
            events += [(at[2 * x] + span * n, x, step) for n, step in enumerate(steps)]
    else:  # slot 256x + k: block x's k-th tile, (plane, i) as stamped
        tile = {part.tile: part for block in kernel.blocks for part in block.parts}
        blocks = [slot // 256 == x for x in np.unique(slot // 256).tolist()]
        every = float(np.median(np.concatenate([np.diff(t[mine]) for mine in blocks])))  # a block of one tile's
        for x, mine in zip(np.unique(slot // 256).tolist(), blocks, strict=True):
            starts = t[mine].tolist()
            starts.append(starts[-1] + (float(np.median(np.diff(starts))) if len(starts) > 1 else every))
            for k, (p, q) in enumerate(zip(plane[mine].tolist(), i[mine].tolist(), strict=True)):
                steps = list(tile[(p, q)].steps())
                span = (starts[k + 1] - starts[k]) / len(steps)
                events += [(starts[k] + span * n, x, step) for n, step in enumerate(steps)]
    events.sort(key=lambda e: (e[0], e[1]))
    return events


def replayed(events: list[tuple], cache) -> int:
    """DRAM bytes read when `events` touch `cache` in their order (a HeldL2 told which block reads)."""
    held = isinstance(cache, HeldL2)
    for _, x, step in events:
        for name, nbytes, kind in step:
            if held:
                cache.touch(name, nbytes, kind, x)
            else:
                cache.touch(name, nbytes, kind)
    return cache.t.dram_read


def replay(out: Path, csv_path: Path) -> None:
    """Each stamped launch of `run` replayed through one L2 half (25 MiB) as the model holds tiles and as HELD
    does, beside ncu's DRAM read of the same launch and the model's lockstep play."""
    from gpu.lab.check_model import profiled_rows
    from sim.machine.hardware import H100_SXM
    from sim.machine.l2 import L2, Traffic, play

    plan = json.loads((out / "plan.json").read_text())
    stamps = np.load(out / "stamps.npz")
    rows = profiled_rows(csv_path.read_text().splitlines())
    forward, backward = kernels()
    cap, mb = H100_SXM.l2_shared_bytes, 10**6  # bytes read in decimal units
    lockstep = [play(k, H100_SXM.sm_count, cap).dram_read for k in (forward, backward)]
    print("launch                       ncu MB  lockstep  replayed, every tile whole  replayed, HELD")
    for n, kind in enumerate(plan):
        if f"l{n}" not in stamps:
            continue
        back = kind.startswith("backward")
        kernel = backward if back else forward
        events = schedule(kernel, stamps[f"l{n}"], back)
        whole = replayed(events, L2(cap, Traffic()))
        held = replayed(events, HeldL2(cap, Traffic(), HELD))
        ncu = rows[n]["dram__bytes_read.sum"]
        print(f"{kind:26s} {ncu / mb:8.1f} {lockstep[back] / mb:9.1f} {whole / mb:13.1f} ×{whole / ncu:.2f}"
              f" {held / mb:13.1f} ×{held / ncu:.2f}")  # fmt: skip


def decoded(stamps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(slot, time ns, smid, a, b) of each written stamp."""
    t, word = stamps[0::2].astype(np.int64), stamps[1::2]
    slot = np.nonzero(t)[0]
    w = word[slot]
    return (
        slot,
        t[slot],
        (w >> 48).astype(np.int64),
        ((w >> 24) & 0xFFFFFF).astype(np.int64),
        (w & 0xFFFFFF).astype(np.int64),
    )


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "run":
        run(Path(argv[1]))
    elif argv == ["plain"]:
        plain()
    elif len(argv) == 3 and argv[0] == "replay":
        replay(Path(argv[1]), Path(argv[2]))
    else:
        print(
            "usage: python -m gpu.lab.block_stamps run OUT_DIR | plain (on a GPU, under ncu) | replay OUT_DIR NCU.csv"
        )
        sys.exit(2)


if __name__ == "__main__":
    main()
