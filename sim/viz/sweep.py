"""What `flashsim sweep` prints (a rich table) and draws (`plot`, with matplotlib if it is installed)."""

import io

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sim.core.errors import InputError
from sim.core.format import count, decimal_bytes, fixed, human_bytes, number, ratio, seconds, short_time, tflops
from sim.lab.sweep import Sweep


def table(sw: Sweep) -> RenderableType:
    """Standard attention and FlashAttention, a row per configuration: bytes, FLOPs, intensity, roofline time and
    bound; FlashAttention's time and bound below HBM (sim.machine) in a table of their own, so that the default sweep
    fits 80 columns (blocks the same in every row are named in the title); where standard runs out of memory."""
    hw = sw.hardware
    passes = "forward + backward" if sw.backward else "forward"
    title = Text(
        f"standard attention vs {sw.algorithm} · {passes} · batch {sw.batch} × {sw.heads} heads · {sw.dtype} · "
        f"{hw.name} ({decimal_bytes(hw.hbm_bytes)} HBM, {fixed(hw.hbm_bandwidth / 1e9, 0)} GB/s, "
        f"{tflops(hw.peak(sw.dtype) / 1e12, 0)} TFLOP/s)" + (" · causal" if sw.causal else ""),
        style="bold",
    )

    def blocks(r) -> str:
        b = f"{r.block_rows}×{r.block_cols}"
        return f"{b} / {r.backward_blocks[0]}×{r.backward_blocks[1]}" if r.backward_blocks else b

    keys = [("N", lambda r: count(r.n))]  # what tells the rows apart: N, and d, blocks, SRAM where they vary
    if len({r.d for r in sw.rows}) > 1:
        keys.append(("d", lambda r: str(r.d)))
    one_block = len({blocks(r) for r in sw.rows}) == 1
    if not one_block:
        keys.append(("Br×Bc fwd / bwd" if sw.backward else "Br×Bc", blocks))
    if len({r.sram_bytes for r in sw.rows}) > 1:
        keys.append(("SRAM", lambda r: human_bytes(r.sram_bytes)))

    def side_table(name: str, columns: list[tuple[str, object]]) -> Table:
        t = Table(title=name, title_justify="left", show_edge=False)
        for column, _ in keys + columns:
            t.add_column(column, justify="right")
        for r in sw.rows:
            t.add_row(*[cell(r) for _, cell in keys + columns])
        return t

    def roofline(side) -> list[tuple[str, object]]:
        return [
            ("HBM", lambda r: decimal_bytes(side(r).hbm_bytes)), ("GFLOP", lambda r: fixed(side(r).flops / 1e9, 0)),
            ("FLOP/B", lambda r: number(side(r).intensity, 0)), ("time", lambda r: seconds(side(r).seconds)),
            ("bound", lambda r: side(r).bound),
        ]  # fmt: skip

    def memory(r) -> Text:
        text = decimal_bytes(r.standard.memory_bytes)
        return Text(text, style="green") if r.standard_fits else Text(f"{text} OOM", style="bold red")

    flash_title = sw.algorithm
    if one_block:  # the same blocks in every row (a sweep of no rows has none to name)
        r0, bwd = sw.rows[0], sw.rows[0].backward_blocks
        flash_title += f" · Br×Bc {r0.block_rows}×{r0.block_cols}" + (
            f" forward, {bwd[0]}×{bwd[1]} backward" if bwd else ""
        )
    speedup = ("speedup", lambda r: ratio(r.standard.seconds / r.flash.seconds))
    standard = side_table(
        "standard attention", [*roofline(lambda r: r.standard), ("in HBM (S, P, Q, K, V, O)", memory)]
    )
    flash = side_table(flash_title, [*roofline(lambda r: r.flash), speedup])
    below = side_table(f"{sw.algorithm} below HBM", [  # "—": not predicted (the footnote says why)
        ("time", lambda r: "—" if r.flash.below is None else short_time(r.flash.below[0])),
        ("bound", lambda r: "—" if r.flash.below is None else r.flash.below[1]),
    ])  # fmt: skip
    ridge = hw.peak(sw.dtype) / hw.hbm_bandwidth
    how = "L2 serves the re-reads of K and V, the SM's units and waves take the time"
    predicted = (
        f"sim.machine's time and bound: {how}; the time is the forward's, as `flashsim run --counts-only` predicts "
        "it, plus the backward's, predicted the same way (`flashsim run --backward` predicts the forward alone); the "
        "bound is the longer pass's"
        if sw.backward
        else f"sim.machine's time and bound, as `flashsim run --counts-only` predicts them: {how}"
    )
    unmodelled = "; or a backward sim.machine does not model: it models flash2's alone" if sw.backward else ""
    oom = (
        f"standard attention runs out of memory at N = {count(sw.oom_n)}: S and P (with Q, K, V, O) take "
        f"{decimal_bytes(next(r.standard.memory_bytes for r in sw.rows if r.n == sw.oom_n))} "
        f"for {sw.batch} × {sw.heads} heads, more than the {decimal_bytes(hw.hbm_bytes)} of the {hw.name}; "
        f"the largest N that fits is {count(sw.largest_n)}"
        if sw.oom_n
        else f"standard attention fits every N of this sweep (up to N = {count(sw.largest_n)} on the {hw.name})"
    )
    return Group(
        title, standard, Text(""), flash,
        Text(f"time = Σ over kernels of max(FLOPs / peak, bytes / bandwidth): the roofline at HBM, the paper's; a "
             f"kernel above {number(ridge, 0)} FLOP/B is compute-bound", style="dim"),
        Text(""), below,
        Text(f"{predicted} (—: too large to play the L2 for in a sweep, `flashsim run --counts-only` plays larger "
             f"ones{unmodelled})", style="dim"),
        Text(oom, style="bold red" if sw.oom_n else "green"),
    )  # fmt: skip


def plot(sw: Sweep, path, fmt: str | None = None) -> None:
    """Write HBM traffic and estimated time against N, both algorithms, to an image file (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot: needs matplotlib, which is not installed; pip install matplotlib") from None
    fig, (traffic, time) = plt.subplots(1, 2, figsize=(11, 4.2))
    groups = sorted({(r.d, r.block_cols, r.sram_bytes) for r in sw.rows})
    for (d, block, sram), line in zip(groups, ("-", "--", ":", "-.") * len(groups), strict=False):
        rows = [r for r in sw.rows if (r.d, r.block_cols, r.sram_bytes) == (d, block, sram)]
        varying = [(f"d={d}", 0), (f"Bc={block}", 1), (f"SRAM {human_bytes(sram)}", 2)]
        parts = [text for text, i in varying if len({g[i] for g in groups}) > 1]
        label = f" ({', '.join(parts)})" if parts else ""
        ns = [r.n for r in rows]
        for ax, value in ((traffic, lambda side: side.hbm_bytes / 1e9), (time, lambda side: side.seconds * 1e3)):
            ax.plot(ns, [value(r.standard) for r in rows], "o" + line, color="tab:red", label=f"standard{label}")
            oom = [r for r in rows if not r.standard_fits]  # hollow: S and P would not fit in HBM
            ax.plot([r.n for r in oom], [value(r.standard) for r in oom], "o", color="white", markersize=4)
            ax.plot(ns, [value(r.flash) for r in rows], "s" + line, color="tab:blue", label=f"{sw.algorithm}{label}")
    for ax, ylabel in ((traffic, "HBM traffic (GB)"), (time, "estimated time (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("N")
        ax.set_ylabel(ylabel)
        if sw.oom_n:
            ax.axvline(sw.oom_n, color="tab:red", linestyle=":", label=f"standard OOM at N = {count(sw.oom_n)}")
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    passes = "forward + backward" if sw.backward else "forward"
    fig.suptitle(f"{passes}, batch {sw.batch} × {sw.heads} heads, {sw.dtype}, {sw.hardware.name}")
    fig.tight_layout()
    image = io.BytesIO()  # drawn whole first: PNG's writer seeks, which a pipe cannot
    fig.savefig(image, format=fmt)
    plt.close(fig)
    with open(path, "wb") as f:
        f.write(image.getvalue())
