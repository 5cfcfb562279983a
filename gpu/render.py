"""Rich renderers for the GPU commands: pure functions from results to renderables."""

from collections.abc import Callable

from rich.console import Group
from rich.table import Table
from rich.text import Text

from sim.format import abs_error, human_bytes, number, percent, ratio, tflops


def _tflops(entry: dict | None) -> str:
    """One implementation's TFLOP/s, or why it has none (OOM, skipped), or — where it did not run."""
    if entry is None:
        return "—"
    if "status" in entry:
        return entry["status"]
    return tflops(entry["tflops"])


def _versus(a: dict | None, b: dict | None, show: Callable[[float], str]) -> str:
    """a's TFLOP/s over b's, shown by `show`, or — where either has none."""
    if not a or not b or "tflops" not in a or "tflops" not in b:
        return "—"
    return show(a["tflops"] / b["tflops"])


def _mem(entry: dict | None) -> str:
    if not entry or "peak_extra_bytes" not in entry:
        return entry.get("status", "—") if entry else "—"
    return human_bytes(entry["peak_extra_bytes"])


BENCH_COLUMNS = ("dtype", "d", "causal", "N", "v2", "SDPA flash", "v2/SDPA", "standard", "v2/standard", "v1",
                 "mem v2", "mem SDPA", "mem standard")  # fmt: skip


def _bench_cells(r: dict) -> list[str]:
    """One row of the benchmark table, in BENCH_COLUMNS order."""
    return [
        {"float16": "fp16", "bfloat16": "bf16"}[r["dtype"]], str(r["d"]), "yes" if r["causal"] else "no", str(r["n"]),
        _tflops(r["v2"]), _tflops(r.get("sdpa")), _versus(r["v2"], r.get("sdpa"), lambda x: number(x, 2)), _tflops(r["standard"]),
        _versus(r["v2"], r["standard"], ratio), _tflops(r["v1"]), _mem(r["v2"]), _mem(r.get("sdpa")), _mem(r["standard"]),
    ]  # fmt: skip


def _bench_notes(report: dict) -> list[str]:
    notes = list(report["notes"])
    if report.get("torch"):
        notes.append(f"SDPA: torch {report['torch']}, torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION)")
    return notes


def bench_table(report: dict) -> Group:
    """The `flashsim bench gpu` table: TFLOP/s per implementation, v2 against SDPA and standard, memory."""
    table = Table(title=f"FlashAttention-2 forward on {report['device']['name']} (TFLOP/s)", title_justify="left")
    for col in BENCH_COLUMNS:
        table.add_column(col, justify="right")
    for r in report["rows"]:
        table.add_row(*_bench_cells(r))
    return Group(table, *(Text(f"· {note}", style="dim") for note in _bench_notes(report)))


def bench_markdown(report: dict) -> str:
    """The same table as Markdown, for results files and the README."""
    lines = [
        f"# `flashsim bench gpu` on {report['device']['name']}",
        "",
        *(f"- {note}" for note in _bench_notes(report)),
        "- TFLOP/s from the median of CUDA-event timings after warm-up, on random inputs; memory: the most device "
        "memory a call held beyond its inputs.",
        "",
        "| " + " | ".join(BENCH_COLUMNS) + " |",
        "|" + "---|" * len(BENCH_COLUMNS),
        *("| " + " | ".join(_bench_cells(r)) + " |" for r in report["rows"]),
    ]
    return "\n".join(lines) + "\n"


def comparison(c) -> Group:
    """The `flashsim compare` report: errors, bytes predicted vs measured, time predicted vs measured."""
    cfg = c.config
    head = Text(
        f"{cfg['kernel']} on {cfg['device']} vs the simulator's flash2 with the kernel's tiling: "
        f"N={cfg['n']} Nk={cfg['nk']} d={cfg['d']} batch={cfg['batch']} heads={cfg['heads']} {cfg['dtype']}"
        f"{' causal' if cfg['causal'] else ''}; Br={cfg['block_rows']} Bc={cfg['block_cols']}, "
        f"{human_bytes(cfg['smem_bytes'])} shared memory per block (the simulator was given {human_bytes(cfg['sim_sram_bytes'])} of SRAM)"
    )
    err = Table(title="max |x − float64 reference|", title_justify="left")
    for col in ("", "simulator", "GPU"):
        err.add_column(col, justify="right")
    err.add_row("O", abs_error(c.sim_err, 2), abs_error(c.gpu_err, 2))
    err.add_row("lse", abs_error(c.sim_lse_err, 2), abs_error(c.gpu_lse_err, 2))

    io = Table(title="global-memory traffic, all heads", title_justify="left")
    m, sw = c.counters, c.counters_swizzled
    cols = ["", "predicted (simulator)", "asked for (cp.async)", "L2 → SMs", "measured/predicted"]
    cols += ["L2 → SMs, swizzled rows", "swizzled/predicted"] if sw else []
    for col in [*cols, "DRAM"]:
        io.add_column(col, justify="right")

    def cells(key, ratio_of, asked):
        out = [human_bytes(m[key]), number(m[key] / ratio_of, 3)] if m else ["—", "—"]
        out += [human_bytes(sw[key]), number(sw[key] / ratio_of, 3)] if sw else []
        return [asked, *out]

    asked = human_bytes(m["cp_async_bytes"]) if m and m["cp_async_bytes"] else "—"
    io.add_row("read", human_bytes(c.predicted_read), *cells("l2_read_bytes", c.predicted_read, asked),
               human_bytes(m["dram_read_bytes"]) if m else "—")  # fmt: skip
    io.add_row("write", human_bytes(c.predicted_write), *cells("l2_write_bytes", c.predicted_write, "—"),
               human_bytes(m["dram_write_bytes"]) if m else "—")  # fmt: skip

    t = Table(title="time", title_justify="left")
    for col in ("", "ms", "TFLOP/s"):
        t.add_column(col, justify="right")
    if c.roofline is not None:
        t.add_row(f"roofline: simulator's HBM bytes, {c.hardware} datasheet ({c.roofline.bound}-bound)",
                  number(c.roofline.seconds * 1e3, 3), tflops(c.flops / c.roofline.seconds / 1e12, 1))  # fmt: skip
        if m:
            dram_s = (m["dram_read_bytes"] + m["dram_write_bytes"]) / c.roofline_hw_bandwidth
            floor = max(dram_s, c.roofline.compute_seconds)
            t.add_row(
                "roofline: measured DRAM bytes, same datasheet",
                number(floor * 1e3, 3),
                tflops(c.flops / floor / 1e12, 1),
            )
    t.add_row(
        "measured (CUDA events, median, back-to-back calls)",
        number(c.measured_ms, 3),
        tflops(c.flops / c.measured_ms / 1e9, 1),
    )
    if m:
        t.add_row(
            "measured (ncu gpu__time_duration, one launch)",
            number(m["kernel_ns"] / 1e6, 3),
            tflops(c.flops / m["kernel_ns"] / 1e3, 1),
        )

    notes = []
    if m:
        if not c.gaps:
            notes.append(
                f"The prediction agrees with the L2-level bytes within 5% (reads ×{number(c.read_ratio, 3)}, writes ×{number(c.write_ratio, 3)})."
            )
        else:
            notes.append("The L2-level bytes differ from the prediction by more than 5%: " + "; ".join(c.gaps) + ".")
        notes.append(
            f"DRAM read {percent(m['dram_read_bytes'], c.predicted_read)} of the predicted bytes: the simulator has no L2, but the GPU's "
            f"{human_bytes(cfg['l2_bytes'])} L2 serves most re-reads of K_j and V_j, because the Q blocks of one head run at the "
            "same time and read the same K/V blocks; DRAM sees little more than Q, K, V once. DRAM writes can also trail the "
            "L2 writes: dirty lines may still sit in L2 when the kernel ends."
        )
    else:
        notes.append(c.counters_note)
    if c.roofline is not None:
        achieved = c.roofline.compute_seconds / (c.measured_ms / 1e3)
        if c.roofline.bound == "memory":
            notes.append(
                "The simulator charges every re-read of K_j and V_j to HBM, so at this size its roofline says memory-bound; "
                "on the GPU those re-reads hit L2, and the kernel's floor is the matrix rate."
            )
        notes.append(
            f"The kernel runs at {percent(achieved)} of the {c.hardware} datasheet's dense {cfg['dtype']} peak: that peak is the "
            "Hopper wgmma rate, mma.sync (what v2 uses, like FlashAttention-2) reaches roughly two thirds of it, and the "
            "softmax's exponentials and rescaling share the SM with the matmuls."
        )
    return Group(head, err, io, t, *(Text(n) for n in notes))


def bench_progress(row: dict) -> str:
    """One finished benchmark configuration on one line (printed to stderr while the run goes on)."""
    parts = [f"{k} {_tflops(row.get(k))}" for k in ("v2", "sdpa", "standard", "v1") if k in row]
    return f"{row['dtype']} d={row['d']} causal={row['causal']} N={row['n']}: " + ", ".join(parts) + " TFLOP/s"
