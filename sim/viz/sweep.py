"""What `flashsim sweep` prints (a rich table) and draws (`plot`, with matplotlib if it is installed)."""

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sim.errors import InputError
from sim.memory import DTYPES, human_bytes
from sim.sweep import Sweep


def _bytes(n: float) -> str:
    """Bytes in decimal units, as the paper and GPU datasheets write them: 1.5 GB = 1.5·10⁹ bytes."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000


def _seconds(t: float) -> str:
    return f"{t * 1e3:,.3g} ms" if t < 1 else f"{t:,.3g} s"


def table(sw: Sweep) -> RenderableType:
    """One row per configuration: bytes, FLOPs, intensity, time and bound of both algorithms; where standard runs out of memory."""
    hw = sw.hardware
    passes = "forward + backward" if sw.backward else "forward"
    title = Text(
        f"standard attention vs {sw.algorithm} · {passes} · batch {sw.batch} × {sw.heads} heads · {sw.dtype} · "
        f"{hw.name} ({_bytes(hw.hbm_bytes)} HBM, {hw.hbm_bandwidth / 1e9:,.0f} GB/s, "
        f"{hw.peak(sw.dtype) / 1e12:,.0f} TFLOP/s)" + (" · causal" if sw.causal else ""),
        style="bold",
    )
    several = {name: len({getattr(r, name) for r in sw.rows}) > 1 for name in ("d", "block_cols", "sram_bytes")}
    t = Table(show_edge=False)
    t.add_column("N", justify="right")
    if several["d"]:
        t.add_column("d", justify="right")
    t.add_column("Br×Bc\nfwd / bwd" if sw.backward else "Br×Bc", justify="right")
    if several["sram_bytes"]:
        t.add_column("SRAM", justify="right")
    for side in ("standard", "flash"):
        for name in ("HBM", "GFLOP", "FLOP/B", "time", "bound"):
            t.add_column(f"{side}\n{name}", justify="right", style="" if side == "flash" else "dim" if name == "bound" else "")
    t.add_column("speedup", justify="right")
    t.add_column("S, P in HBM", justify="right")
    for r in sw.rows:
        cells = [f"{r.n:,}"]
        if several["d"]:
            cells.append(str(r.d))
        blocks = f"{r.block_rows}×{r.block_cols}"
        cells.append(f"{blocks} / {r.backward_blocks[0]}×{r.backward_blocks[1]}" if r.backward_blocks else blocks)
        if several["sram_bytes"]:
            cells.append(human_bytes(r.sram_bytes))
        for side in (r.standard, r.flash):
            cells += [_bytes(side.hbm_bytes), f"{side.flops / 1e9:,.0f}", f"{side.intensity:.0f}", _seconds(side.seconds), side.bound]
        cells.append(f"{r.standard.seconds / r.flash.seconds:.1f}×")
        memory = _bytes(r.standard.memory_bytes)
        cells.append(Text(memory, style="green") if r.standard_fits else Text(f"{memory} OOM", style="bold red"))
        t.add_row(*cells)
    ridge = hw.peak(sw.dtype) / hw.hbm_bandwidth
    oom = (
        f"standard attention runs out of memory at N = {sw.oom_n:,}: S and P take {_bytes(2 * sw.batch * sw.heads * sw.oom_n**2 * DTYPES[sw.dtype].itemsize)} "
        f"for {sw.batch} × {sw.heads} heads, more than the {_bytes(hw.hbm_bytes)} of the {hw.name}; "
        f"the largest N that fits is {sw.largest_n:,}"
        if sw.oom_n
        else f"standard attention fits every N of this sweep (up to N = {sw.largest_n:,} on the {hw.name})"
    )
    return Group(
        title, t,
        Text(f"time = Σ over kernels of max(FLOPs / peak, bytes / bandwidth); a kernel above {ridge:.0f} FLOP/B is compute-bound", style="dim"),
        Text(oom, style="bold red" if sw.oom_n else "green"),
    )  # fmt: skip


def plot(sw: Sweep, path: str) -> None:
    """Write HBM traffic and estimated time against N, both algorithms, to an image file (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot: needs matplotlib, which is not installed; pip install matplotlib") from None
    fig, (traffic, time) = plt.subplots(1, 2, figsize=(11, 4.2))
    groups = sorted({(r.d, r.block_cols, r.sram_bytes) for r in sw.rows})
    for (d, block, sram), line in zip(groups, ("-", "--", ":", "-.") * len(groups)):
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
            ax.axvline(sw.oom_n, color="tab:red", linestyle=":", label=f"standard OOM at N = {sw.oom_n:,}")
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    passes = "forward + backward" if sw.backward else "forward"
    fig.suptitle(f"{passes}, batch {sw.batch} × {sw.heads} heads, {sw.dtype}, {sw.hardware.name}")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
