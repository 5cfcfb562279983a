"""What `flashsim paper fig2` prints, from `sim.lab.paper.Figure2`."""

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sim.core.format import fixed, human_bytes, number, ratio
from sim.lab import paper
from sim.viz.unclipped import unclipped

LEGEND = "FA: FlashAttention · paper: the paper's Figure 2, measured on an A100"
MIDDLE = "Figure 2 (middle) · FlashAttention forward (Algorithm 1) as the block size grows"


def figure2(fig: paper.Figure2) -> RenderableType:
    """The left panel beside the paper's numbers, the middle panel, and why the two differ."""
    std, fa = fig.standard, fig.flash
    title = Text(
        f"Figure 2 (left) · attention forward + backward · GPT-2 medium: N={paper.N}, d={paper.D}, "
        f"{paper.HEADS} heads, batch {paper.BATCH}, {paper.DTYPE} · {fig.hardware.name}",
        style="bold",
    )
    left = Table(show_edge=False)
    left.add_column("")
    for source in ("model", "paper"):
        for label in ("standard", "FA", "std ÷ FA"):
            left.add_column(f"{source}\n{label}", justify="right", style="dim" if source == "paper" else "")
    for quantity, ms, mf, ps, pf in fig.rows():
        left.add_row(
            quantity, fixed(ms, 1), fixed(mf, 1), ratio(ms / mf, 2), fixed(ps, 1), fixed(pf, 1), ratio(ps / pf, 2)
        )

    blocks = Table.grid(padding=(0, 2))
    blocks.add_column(style="cyan")
    blocks.add_column()
    for c, name in ((std, "standard (Algorithms 0, 3)"), (fa, "FlashAttention (Algorithms 1, 4)")):
        blocks.add_row(
            name,
            f"forward Br={c.forward.block_rows}, Bc={c.forward.block_cols}; backward Br={c.backward.block_rows}, "
            f"Bc={c.backward.block_cols}; {number(c.forward.hbm_bytes / 1e9, 1)} GB + "
            f"{number(c.backward.hbm_bytes / 1e9, 1)} GB of HBM traffic",
        )
    same = std.matches_closed_form and fa.matches_closed_form
    check = Text(
        "counts: the simulator's ledgers (one head simulated, × 1,024) = iomodel's closed form"
        if same
        else "counts: the simulator's ledgers differ from iomodel's closed form — a bug",
        style="green" if same else "bold red",
    )

    middle = Table(show_edge=False)  # its title a line of its own, not wrapped to the table's width
    for name in (
        "Bc",
        "Br",
        "HBM (GB)",
        "runtime (ms)",
        "bound",
        "SRAM needed",
        f"fits {human_bytes(fig.hardware.sram_bytes)}",
    ):
        middle.add_column(name, justify="right")
    for b in fig.blocks:
        middle.add_row(
            str(b.Bc), str(b.Br), number(b.hbm_bytes / 1e9, 2), number(b.seconds * 1e3, 2), b.bound,
            human_bytes(b.sram_need),
            Text("yes", style="green") if b.fits else Text("no", style="red"),
        )  # fmt: skip

    notes = Table.grid(padding=(0, 1))
    notes.add_column(style="cyan")
    notes.add_column()
    for n, note in enumerate(fig.notes, 1):
        notes.add_row(f"{n}.", note)
    return Group(
        title, unclipped(left), Text(LEGEND, style="dim"), Text(""), blocks, check,
        Text(""), Text(MIDDLE, style="italic"), unclipped(middle), Text(f"The paper: {paper.PAPER_MIDDLE}.", "dim"),
        Text(""), Text("Where the model and the paper differ", style="bold"), notes,
    )  # fmt: skip
