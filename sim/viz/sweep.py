"""What `flashsim sweep` prints (a rich table) and draws (`plot`, with matplotlib if it is installed)."""

import io

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sim.core.errors import InputError
from sim.core.format import count, decimal_bytes, fixed, human_bytes, number, ratio, seconds, tflops
from sim.lab.sweep import Sweep


def table(sw: Sweep) -> RenderableType:
    """One row per configuration: bytes, FLOPs, intensity, time and bound of both algorithms; where standard runs out of memory."""
    hw = sw.hardware
    passes = "forward + backward" if sw.backward else "forward"
    title = Text(
        f"standard attention vs {sw.algorithm} · {passes} · batch {sw.batch} × {sw.heads} heads · {sw.dtype} · "
        f"{hw.name} ({decimal_bytes(hw.hbm_bytes)} HBM, {fixed(hw.hbm_bandwidth / 1e9, 0)} GB/s, "
        f"{tflops(hw.peak(sw.dtype) / 1e12, 0)} TFLOP/s)" + (" · causal" if sw.causal else ""),
        style="bold",
    )
    several = {name: len({getattr(r, name) for r in sw.rows}) > 1 for name in ("d", "block_cols", "sram_bytes")}

    def side_table(name: str, side, before: list[tuple[str, object]], after: list[tuple[str, object]]) -> Table:
        t = Table(title=name, title_justify="left", show_edge=False)
        t.add_column("N", justify="right")
        if several["d"]:
            t.add_column("d", justify="right")
        for column in [c for c, _ in before] + ["HBM", "GFLOP", "FLOP/B", "time", "bound"] + [c for c, _ in after]:
            t.add_column(column, justify="right")
        for r in sw.rows:
            x = side(r)
            cells = [count(r.n)] + ([str(r.d)] if several["d"] else []) + [cell(r) for _, cell in before]
            cells += [decimal_bytes(x.hbm_bytes), fixed(x.flops / 1e9, 0), number(x.intensity, 0), seconds(x.seconds)]
            t.add_row(*cells, x.bound, *[cell(r) for _, cell in after])
        return t

    def memory(r) -> Text:
        text = decimal_bytes(r.standard.memory_bytes)
        return Text(text, style="green") if r.standard_fits else Text(f"{text} OOM", style="bold red")

    def blocks(r) -> str:
        b = f"{r.block_rows}×{r.block_cols}"
        return f"{b} / {r.backward_blocks[0]}×{r.backward_blocks[1]}" if r.backward_blocks else b

    def below(r) -> str:  # sim.machine's time and bound: "—" where its L2 play would take too long
        return "—" if r.flash.below is None else f"{seconds(r.flash.below[0])} {r.flash.below[1]}"

    flash_before = [("Br×Bc fwd / bwd" if sw.backward else "Br×Bc", blocks)]
    if several["sram_bytes"]:
        flash_before.append(("SRAM", lambda r: human_bytes(r.sram_bytes)))
    flash_after = [("below HBM", below), ("speedup", lambda r: ratio(r.standard.seconds / r.flash.seconds))]
    standard = side_table("standard attention", lambda r: r.standard, [], [("in HBM (S, P, Q, K, V, O)", memory)])
    flash = side_table(sw.algorithm, lambda r: r.flash, flash_before, flash_after)
    ridge = hw.peak(sw.dtype) / hw.hbm_bandwidth
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
        Text(f"time = Σ over kernels of max(FLOPs / peak, bytes / bandwidth); a kernel above {number(ridge, 0)} FLOP/B is compute-bound", style="dim"),
        Text("(the roofline at HBM, the paper's). below HBM: sim.machine's time and bound, as `flashsim run` predicts "
             "them: L2 serves the re-reads of K and V, the SM's units and waves take the time (—: too large to "
             "play the L2 for in a sweep; `flashsim run --counts-only` plays larger ones)", style="dim"),
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
