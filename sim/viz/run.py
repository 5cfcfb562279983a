"""The table `flashsim run` prints, from `sim.lab.report.run_report`'s dict."""

import math

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sim.api.tolerance import EXPLAIN
from sim.core.format import abs_error, count, decimal_bytes, human_bytes, more_or_fewer, short_time
from sim.viz.unclipped import unclipped


def traffic_table(report: dict, title: str, closed_form: bool = False) -> Table:
    """Bytes read and written per HBM tensor, and their totals, from a report's `per_tensor` (per kernel when the
    counts come from the closed form)."""
    traffic = Table(title=title + (" (closed form, per kernel)" if closed_form else ""), title_justify="left",
                    show_edge=False)  # fmt: skip
    traffic.add_column("kernel" if closed_form else "tensor")
    traffic.add_column("read", justify="right")
    traffic.add_column("written", justify="right")
    for tensor, rw in report["per_tensor"].items():
        traffic.add_row(tensor, decimal_bytes(rw["read"]), decimal_bytes(rw["write"]))
    total = Text("total", style="bold")
    traffic.add_row(total, decimal_bytes(report["hbm_read_bytes"]), decimal_bytes(report["hbm_write_bytes"]))
    return traffic


def run_table(report: dict) -> RenderableType:
    """Configuration, traffic per tensor, totals against the closed form and standard attention, error."""
    r = report
    shape = f"N={r['n']}, Nk={r['nk']}, d={r['d']}, batch={r['batch']}, heads={r['heads']}, {r['dtype']}"
    title = f"{r['algorithm']} · {shape}" + (" · causal" if r["causal"] else "")
    config = Table.grid(padding=(0, 2))
    config.add_column(style="cyan")
    config.add_column()
    config.add_row("blocks", f"Br={r['block_rows']}, Bc={r['block_cols']}")
    counted = r.get("source") == "closed form"
    sram = f"{'needs' if counted else 'peak'} {human_bytes(r['sram_peak_bytes'])} of {human_bytes(r['sram_bytes'])} ({r['hardware']})"
    if r["sram_peak_bytes"] > r["sram_bytes"]:  # only a closed-form count gets here
        sram = Text.assemble(sram, (" — more than the SRAM: the simulator would refuse this shape", "bold red"))
    config.add_row("SRAM", sram)
    config.add_row("scale", f"{r['scale']:.6g}")

    traffic = traffic_table(r, "HBM traffic", counted)

    closed = r["closed_form"]
    if counted:
        check = Text("from the closed form (iomodel), nothing simulated (--counts-only)", style="dim")
    elif closed["matches"]:
        check = Text("= closed form (iomodel)", style="green")
    else:
        check = Text(
            f"≠ closed form: {count(closed['hbm_read_bytes'])} read, {count(closed['hbm_write_bytes'])} written",
            style="bold red",
        )
    totals = Table.grid(padding=(0, 2))
    totals.add_column(style="cyan")
    totals.add_column(justify="right")
    totals.add_column()
    totals.add_row("HBM bytes", count(r["hbm_bytes"]), check)
    if r["l2_read_bytes"]:
        totals.add_row(
            "L2 re-reads", count(r["l2_read_bytes"]), Text("not HBM traffic (Theorem 2's assumption)", style="dim")
        )
    totals.add_row("matmul FLOPs", count(r["flops"]), "")
    totals.add_row("exponentials", count(r["exps"]), "")
    if r["algorithm"] != "standard":
        more = more_or_fewer(r["standard_hbm_bytes"] / r["hbm_bytes"])
        totals.add_row("standard attention", count(r["standard_hbm_bytes"]), f"HBM bytes for the same shape: {more}")
    err = r["max_abs_err"]
    if err is None:  # nothing was checked: no verdict
        totals.add_row("max |O − ref|", "not computed (--counts-only)", "")
    else:
        totals.add_row("max |O − ref|", abs_error(err), verdict(r))
    parts = [Text(title, style="bold"), config, Text(""), unclipped(traffic), Text(""), unclipped(totals)]
    if r.get("machine"):
        parts += [Text(""), time_table(r["machine"], r["hbm_read_bytes"])]
    if r.get("tolerance") and r["tolerance"]["bound"] != math.inf:
        tol = r["tolerance"]
        parts.append(Text(f"{r['dtype']} tolerance: max|O − ref| ≤ {tol['formula']}; {EXPLAIN}", "dim"))
    return Group(*parts)


def time_table(m: dict, global_read: int) -> RenderableType:
    """Where the time goes (sim.machine): each resource's time alone, the bound, and DRAM beside global bytes."""
    title = Text(f"where the time goes on {m['hardware']} (sim.machine: L2, waves; {m['launch']})", style="italic")
    table = Table(show_edge=False)  # the title a line of its own: as the table's, it wrapped to the table's width
    for col in ("resource", "time alone", "of the predicted"):
        table.add_column(col, justify="left" if col == "resource" else "right")
    for name, seconds in m["terms"].items():
        style = "bold" if name == m["bound"] else ""
        table.add_row(Text(name, style=style), short_time(seconds), f"{seconds / m['seconds']:.0%}")
    sms = m["compute_seconds"]
    table.add_row("SMs: each block's parts in series, in waves", short_time(sms), f"{sms / m['seconds']:.0%}")
    table.add_row(Text(f"predicted (bound: {m['bound']})", style="bold"), short_time(m["seconds"]), "")
    table.add_row(
        "DRAM read", decimal_bytes(m["dram_read_bytes"]), f"{m['dram_read_bytes'] / global_read:.0%} of HBM reads"
    )
    return Group(title, unclipped(table))


def verdict(report: dict) -> Text:
    """✓ within the tolerance stated for the dtype (`sim.api.tolerance`), ✗ outside it, or just "vs float64"."""
    tol = report.get("tolerance")
    if not tol:
        return Text("vs float64", style="dim")
    if tol["bound"] == math.inf:
        return Text(f"vs float64 ({tol['formula']})", style="dim")
    if tol["within"]:
        return Text.assemble(
            ("✓ within", "bold green"), (f" {report['dtype']} tolerance (≤ {abs_error(tol['bound'])})", "dim")
        )
    return Text.assemble(("✗ outside", "bold red"), f" {report['dtype']} tolerance (≤ {abs_error(tol['bound'])})")
