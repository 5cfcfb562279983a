"""The tables `flashsim ring` prints, from the report's dict: each device's bytes, each step's compute and transfer."""

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sim.core.format import abs_error, count, decimal_bytes, plural, ratio, short_time
from sim.viz.unclipped import unclipped


def devices_table(one: dict, title: str) -> Table:
    """Per device: HBM bytes read and written, matmul FLOPs, bytes sent on its link; against the closed forms."""
    simulated = one["source"] == "simulated"
    table = Table(title=title, title_justify="left", show_edge=False)
    for name in ("device", "HBM\nread", "HBM\nwritten", "matmul\nFLOPs", "link\nsent", ""):
        table.add_column(name, justify="left" if name in ("device", "") else "right")
    for row in one["devices"]:
        counted = row if simulated else row["closed_form"]
        check = ("= closed form" if row["matches"] else "≠ closed form") if simulated else "closed form"
        style = ("green" if row["matches"] else "bold red") if simulated else "dim"
        table.add_row(str(row["device"]), decimal_bytes(counted["hbm_read_bytes"]),
                      decimal_bytes(counted["hbm_write_bytes"]), count(counted["flops"]),
                      decimal_bytes(counted["link_bytes_sent"]), Text(check, style=style))  # fmt: skip
    return unclipped(table)


def steps_table(one: dict, title: str) -> RenderableType:
    """Per step: the slowest device's compute and transfer, the step as max(compute, transfer), and what bounds it;
    then the time without overlap."""
    table = Table(title=title, title_justify="left", show_edge=False)
    for name in ("step", "compute", "transfer", "step\n(overlapped)", "bound by"):
        table.add_column(name, justify="left" if name in ("step", "bound by") else "right")
    for s in one["steps"]:
        style = "yellow" if s["bound"] == "transfer" else ""
        table.add_row(s["step"], short_time(s["compute_s"]), short_time(s["transfer_s"]), short_time(s["overlapped_s"]),
                      Text(s["bound"], style=style))  # fmt: skip
    saved = one["serial_s"] / one["overlapped_s"] if one["overlapped_s"] else 1.0
    table.add_row(Text("total", style="bold"), "", "", short_time(one["overlapped_s"]), "", end_section=True)
    serial = f"without overlap {short_time(one['serial_s'])}, {ratio(saved, 2)} the total"
    return Group(unclipped(table), Text(serial, style="dim"))


def ring_table(report: dict) -> RenderableType:
    """The configuration, each pass's devices and steps, the overlap condition and the error against float64."""
    r, link = report, report["link"]
    scheme = "ring attention" if r["scheme"] == "ring" else "Ulysses (all-to-all)"
    split = f"{r['sharding']} shards" if r["scheme"] == "ring" else f"{plural(r['heads_per_device'], 'head')} each"
    heads = plural(r["heads"], "head") if r["batch"] == 1 else f"batch {r['batch']} × {plural(r['heads'], 'head')}"
    title = (f"{scheme} · {r['devices']} devices, {split} · N={count(r['n'])}, d={r['d']}, {heads}, "
             f"{r['dtype']}" + (" · causal" if r["causal"] else ""))  # fmt: skip
    config = Table.grid(padding=(0, 2))
    config.add_column(style="cyan")
    config.add_column()
    config.add_row("link", f"{link['name']}: {decimal_bytes(link['bandwidth_bytes_per_s'])}/s each way, "
                           f"{short_time(link['latency_s'])} per message")  # fmt: skip
    config.add_row("each device", f"{r['hardware']} · blocks Br={r['block_rows']}, Bc={r['block_cols']}")
    held = Text(f"{decimal_bytes(r['hbm_per_device'])} of its {decimal_bytes(r['hbm_capacity'])} in the forward")
    if r["hbm_per_device"] > r["hbm_capacity"]:
        held.append(" — more than a device's HBM: use more devices", style="bold red")
    config.add_row("HBM held", held)
    if r["scheme"] == "ring":
        config.add_row("overlap needs", f"≥ {count(r['min_shard'])} rows per shard (unmasked, latency aside): "
                                        f"these shards have {count(r['shard_rows'])}")  # fmt: skip
    parts = [Text(title, style="bold"), config]
    for name in ("forward", "backward"):
        if name in r:
            parts += [Text(""), devices_table(r[name], f"{name}: each device"),
                      Text(""), steps_table(r[name], f"{name}: time per step (the slowest device)")]  # fmt: skip
    check = r.get("check")
    if check is None:
        parts.append(Text("from the closed forms alone (sim.machine.ring_model), nothing simulated", style="dim"))
    else:
        mark = ("✓ within", "bold green") if check["within"] else ("✗ outside", "bold red")
        parts += [Text(""), Text.assemble(f"max |O − ref| {abs_error(check['error'])}  ", mark,
                                          (f" the ring's bound {check['formula']} (≤ {abs_error(check['bound'])})",
                                           "dim"))]  # fmt: skip
    return Group(*parts)
