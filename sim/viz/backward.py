"""The backward half of `flashsim run --backward`, from `sim.lab.training.backward_report` and `split`."""

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sim.core.format import abs_error, count, human_bytes
from sim.viz.run import traffic_table
from sim.viz.unclipped import unclipped


def backward_table(report: dict) -> RenderableType:
    """The backward pass's traffic per tensor and its check against the closed form; then forward, backward, total."""
    b = report["backward"]
    title = Text(
        f"backward · Br={b['block_rows']}, Bc={b['block_cols']} · SRAM {'needs' if report.get('source') == 'closed form' else 'peak'} {human_bytes(b['sram_peak_bytes'])}",
        style="bold",
    )
    counted = report.get("source") == "closed form"
    traffic = traffic_table(b, "HBM traffic (backward)", counted)
    if counted:
        check = Text("backward from the closed form (iomodel), nothing simulated (--counts-only)", style="dim")
    elif b["closed_form"]["matches"]:
        check = Text("backward = closed form (iomodel), byte for byte and FLOP for FLOP", style="green")
    else:
        check = Text("backward ≠ closed form (iomodel)", style="bold red")

    split = report["forward_backward"]
    totals = Table(title="forward + backward", title_justify="left", show_edge=False)
    totals.add_column("")
    for name in ("forward", "backward", "total"):
        totals.add_column(name, justify="right")
    for key, label in (
        ("hbm_bytes", "HBM bytes"),
        ("flops", "matmul FLOPs"),
        ("exps", "exponentials"),
        ("elementwise", "other elementwise"),
    ):
        totals.add_row(label, *(count(split[key][p]) for p in ("forward", "backward", "total")))
    err = b["max_abs_err"]
    error = Text(
        "gradients: not checked (--counts-only)"
        if err is None
        else f"max |dQ − ref| {abs_error(err['dq'])}, |dK − ref| {abs_error(err['dk'])}, |dV − ref| {abs_error(err['dv'])} (vs float64)",
        style="dim",
    )
    return Group(Text(""), title, unclipped(traffic), check, Text(""), unclipped(totals), error)
