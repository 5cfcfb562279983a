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
    traffic = traffic_table(b, "backward HBM traffic", counted)
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
    return Group(Text(""), title, unclipped(traffic), check, Text(""), unclipped(totals), *gradient_lines(report))


def gradient_lines(report: dict) -> list[Text]:
    """Each gradient's max|error| against float64 with its verdict (✓ within, ✗ outside its bound), then the
    bound's reason; or why they were not checked."""
    b = report["backward"]
    err, tol = b["max_abs_err"], b.get("tolerance")
    if err is None:
        return [Text("gradients: not checked (--counts-only)", style="dim")]
    lines = []
    for name, label in (("dq", "dQ"), ("dk", "dK"), ("dv", "dV")):
        line = Text(f"max |{label} − ref| {abs_error(err[name])}  ")
        if not tol:
            line.append("vs float64", style="dim")
        elif tol["each"][name]:
            line.append_text(
                Text.assemble(
                    ("✓ within", "bold green"),
                    (f" {report['dtype']} tolerance (≤ {abs_error(tol['bound'][name])})", "dim"),
                )
            )
        else:
            line.append_text(
                Text.assemble(
                    ("✗ outside", "bold red"), f" {report['dtype']} tolerance (≤ {abs_error(tol['bound'][name])})"
                )
            )
        past = b.get("past_range", {}).get(name)
        if past:
            line.append(f"; {count(past)} past {report['dtype']}'s range stored as ±inf, as the exact values round",
                        style="dim")  # fmt: skip
        lines.append(line)
    if tol:
        lines.append(Text(f"gradient tolerance: {tol['formula']}", style="dim"))
    elif b.get("no_bound"):
        lines.append(Text(f"gradients: no bound stated: {b['no_bound']}", style="dim"))
    return lines
