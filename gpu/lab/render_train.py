"""Rich renderer for `flashsim demo train`: a pure function from the training report to a renderable."""

from rich.console import Group
from rich.table import Table
from rich.text import Text

from sim.core.format import count, number, ratio


def name(impl: str, report: dict) -> str:
    """The table's label for an implementation: flashsim's FlashAttention with the rungs it ran (as recorded)."""
    if impl == "standard":
        return "flashsim standard attention (P stored)"
    if impl == "sdpa":
        return "PyTorch SDPA, its default backend"
    rungs = report.get("rungs", {"forward": 3, "backward": 5})  # recordings before rung 6 ran rungs 3 + 5
    return f"flashsim FlashAttention (rungs {rungs['forward']} + {rungs['backward']})" if impl == "flash" else impl


def checkpoints(steps: int) -> list[int]:
    """The steps whose loss the table shows: the first, a few in between, the last."""
    return sorted({0, steps // 4, steps // 2, 3 * steps // 4, steps - 1})


def training_table(report: dict) -> Group:
    """Loss at a few steps and tokens/s for each implementation, and how far apart the two curves ever got."""
    c = report["config"]
    steps = checkpoints(c["steps"])
    table = Table(
        title=f"Tiny causal LM on {report['env']['gpu']}: {c['layers']} layers, d_model {c['d_model']}, {c['heads']} heads, "
        f"batch {c['batch']} × {c['seq']} tokens, {c['dtype']} attention, {c['steps']} steps",
        title_justify="left",
    )
    table.add_column("attention")
    for s in steps:
        table.add_column(f"loss @ {s + 1}", justify="right")
    table.add_column("tokens/s", justify="right")
    for impl, losses in report["losses"].items():
        table.add_row(
            name(impl, report), *(number(losses[s], 4) for s in steps), count(round(report["tokens_per_s"][impl]))
        )
    flash, standard = report["tokens_per_s"]["flash"], report["tokens_per_s"]["standard"]
    notes = [
        f"The two loss curves differ by at most {number(report['max_loss_gap'], 4)} (mean {number(report['mean_loss_gap'], 4)}) over "
        f"{c['steps']} steps, from the same initial weights on the same batches ({report['text']}).",
        f"flashsim's FlashAttention trains at {ratio(flash / standard, 2)} the tokens/s of the standard baseline.",
    ]
    if "sdpa" in report["tokens_per_s"]:  # recordings before issue 23 ran flashsim's two only
        notes.append(
            f"… and at {ratio(flash / report['tokens_per_s']['sdpa'], 2)} the tokens/s of PyTorch's default SDPA."
        )
    return Group(table, *(Text(n) for n in notes))
