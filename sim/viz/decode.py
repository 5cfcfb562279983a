"""What `flashsim decode` prints, from `sim.machine.occupancy.Occupancy` rows."""

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sim.core.format import count, decimal_bytes, fixed, percent, plural, ratio
from sim.machine.hardware import Hardware
from sim.machine.occupancy import WAVE_SECONDS, Occupancy
from sim.viz.unclipped import unclipped


def decode_table(
    rows: list[Occupancy],
    best: int,
    *,
    fit: int | None = None,
    batch: int,
    heads: int,
    queries: int,
    nk: int,
    d: int,
    dtype: str,
    hw: Hardware,
) -> RenderableType:
    """One row per number of splits: thread blocks, SMs kept busy, waves, traffic and the model's time; splits past
    `fit` (whose buffers do not fit the SRAM; None: all fit) marked †."""
    most = max(r.splits for r in rows)
    fit = most if fit is None else fit
    title = Text(
        f"Flash-Decoding · {queries} query row{'s' * (queries > 1)} against Nk={count(nk)} keys · d={d} · "
        f"batch {batch} × {heads} heads · {dtype} · {hw.name}",
        style="bold",
    )
    t, first = Table(show_edge=False), rows[0].splits
    for name in ("splits", "thread\nblocks", f"SMs busy\n(of {hw.sm_count})", "waves", "SM-time\nused", "HBM\nbytes",
                 "time", f"vs {first}\nsplit{'s' * (first > 1)}"):  # fmt: skip
        t.add_column(name, justify="right")
    one = rows[0].seconds
    for r in rows:
        style = "bold green" if r.splits == best else ""
        t.add_row(
            f"{r.splits}" + "*" * (r.splits == best), count(r.blocks), f"{r.busy}", f"{r.waves}",
            percent(r.utilization), decimal_bytes(r.hbm_bytes), f"{fixed(r.seconds * 1e6, 1)} µs" + "†" * (r.splits > fit),
            ratio(one / r.seconds), style=style,
        )  # fmt: skip
    notes = ["1 split: FlashAttention-2, one thread block per (batch, head)"] if first == 1 else []
    for r in (r for r in rows if r.splits == best):  # the model's best, where it is one of the rows
        than = f", {ratio(one / r.seconds)} the speed of {plural(first, 'split')}" if r is not rows[0] else ""
        notes.append(f"*: the fastest{' that fits' * (fit < most)}, {plural(best, 'split')}{than}")
    if fit < most:
        notes.append(
            f"†: the combine's O, O_p and lse_p for {count(queries)} query rows in that many splits do not fit the "
            f"{hw.name}'s SRAM: the model's time only, not a choice"
        )
    model = Text(
        "model: a thread block streams its keys at one SM's share of the HBM bandwidth, blocks run in waves of one "
        f"per SM, each wave also takes {WAVE_SECONDS * 1e6:g} µs (its blocks' fill and drain), and the combine reads "
        "every partial O_p and lse_p once at full bandwidth",
        style="dim",
    )
    return Group(title, unclipped(t), *map(Text, notes), model)
