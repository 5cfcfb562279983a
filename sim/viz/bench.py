"""Tables for `flashsim bench sim` and `bench cli`."""

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sim.core.format import human_bytes, number, seconds


def sim_table(report: dict) -> RenderableType:
    """Full-numerics time of each algorithm against plain NumPy, and flash2's peak memory at long N."""
    m = report["machine"]
    table = Table(
        title=f"Simulator speed · N={report['n']}, d={report['d']}, {report['dtype']}, median of {report['repeats']}",
        title_justify="left",
    )
    table.add_column("")
    table.add_column("blocks", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("× NumPy", justify="right")
    table.add_row("plain NumPy standard attention (float32)", "", number(report["numpy_seconds"], 3), "1.00")
    for row in report["rows"]:
        table.add_row(
            f"sim {row['algorithm']}",
            f"{row['block_rows']}×{row['block_cols']}",
            number(row["seconds"], 3),
            number(row["ratio_to_numpy"], 2),
        )
    load = m.get("load_average")
    machine = f"{m['cpu']} · {m['cores']} cores · Python {m['python']} · NumPy {m['numpy']}" + (
        f" · load average {load[0]:.2f}" if load else ""
    )
    parts = [Text(f"{machine} · OPENBLAS_NUM_THREADS={m['blas_threads']}", style="dim"), table]
    mem = report["memory"]
    if mem:
        parts.append(
            Text(
                f"flash2, full numerics, N={mem['n']}, d={mem['d']} (blocks {mem['block_rows']}×{mem['block_cols']}): "
                f"peak RSS {human_bytes(mem['peak_rss_bytes'])} (of which {human_bytes(mem['rss_before_run_bytes'])} "
                f"before the run) in {number(mem['seconds'], 1)} s; one N×N float32 matrix would be "
                f"{human_bytes(mem['n_by_n_float32_bytes'])}."
            )
        )
    return Group(*parts)


def cli_table(report: dict) -> RenderableType:
    """One row per command: wall time in fresh processes (the median of its runs), peak resident memory, exit code."""
    m = report["machine"]
    repeats = report.get("repeats", 1)
    table = Table(
        title=f"flashsim commands, each in fresh processes (Python's start-up included; --counts-only: median of "
        f"{repeats} after a warm-up)",
        title_justify="left",
    )
    table.add_column("command")
    table.add_column("seconds", justify="right")
    table.add_column("slowest", justify="right")
    table.add_column("peak RSS", justify="right")
    table.add_column("exit", justify="right")
    for row in report["rows"]:
        rss = "—" if row["peak_rss_bytes"] is None else human_bytes(row["peak_rss_bytes"])
        slowest = seconds(max(row.get("seconds_each", [row["seconds"]])))
        table.add_row(row["command"], seconds(row["seconds"]), slowest, rss, str(row["exit_code"]))
    load = m.get("load_average")
    machine = f"{m['cpu']} · {m['cores']} cores · Python {m['python']} · NumPy {m['numpy']}" + (
        f" · load average {load[0]:.2f}" if load else ""
    )
    cached = report.get("bytecode_cached")
    notes = [Text(machine, style="dim")]
    if cached is not None:
        notes.append(Text("flashsim's bytecode " + ("cached" if cached else "not cached: each start compiles it"),
                          style="dim"))  # fmt: skip
    errors = [Text(f"{r['command']}: {r['stderr']}", style="red") for r in report["rows"] if r["exit_code"] != 0]
    return Group(*notes, table, *errors)
