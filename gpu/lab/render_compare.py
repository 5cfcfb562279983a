"""Rich renderers for `flashsim compare [--backward]`: pure functions from comparisons to renderables."""

from rich.console import Group
from rich.table import Table
from rich.text import Text

from gpu import registry
from gpu.lab.compare import asked_bytes
from sim.core.format import abs_error, decimal_bytes, human_bytes, number, percent, short_time, tflops


def _ratio(a: float, b: float) -> str:
    """a over b as a measured/predicted factor: ×1.486."""
    return f"×{number(a / b, 3)}" if b else "—"


def _headline(kernel: str, listing: str, cfg: dict, after: str = "") -> Text:
    """What was compared: the kernel, the simulator's listing, the shape and the tiling."""
    return Text(
        f"{kernel} on {cfg['device']} vs the simulator's {listing} with the kernel's tiling: "
        f"N={cfg['n']} Nk={cfg['nk']} d={cfg['d']} batch={cfg['batch']} heads={cfg['heads']} {cfg['dtype']}"
        f"{' causal' if cfg['causal'] else ''}; Br={cfg['block_rows']} Bc={cfg['block_cols']}, "
        f"{human_bytes(cfg['smem_bytes'])} shared memory per block{after}"
    )


def _table(title: str, columns) -> Table:
    """A table titled on the left, its columns right-aligned."""
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, justify="right")
    return table


def _time_table(c) -> Table:
    """The time table, opened with the roofline of the simulator's bytes when the GPU has a preset."""
    t = _table("time", ("", "time", "TFLOP/s"))
    if c.roofline is not None:
        t.add_row(f"roofline: simulator's HBM bytes, {c.hardware} datasheet ({c.roofline.bound}-bound)",
                  short_time(c.roofline.seconds), tflops(c.flops / c.roofline.seconds / 1e12, 1))  # fmt: skip
    p = c.prediction
    if p is not None:
        t.add_row(f"predicted: machine model (L2, waves, {p.launch.instruction}; bound: {p.bound})",
                  short_time(p.seconds), tflops(c.flops / p.seconds / 1e12, 1))  # fmt: skip
    return t


def _dram_note(p, dram_read: float | None, dram_write: float | None) -> Text:
    """One line: the machine model's DRAM bytes beside the measured ones."""
    measured = "" if dram_read is None else f" (measured {decimal_bytes(dram_read)} and {decimal_bytes(dram_write)})"
    return Text(
        f"Machine model (sim.machine): DRAM read {decimal_bytes(p.dram_read_bytes)}, written "
        f"{decimal_bytes(p.dram_write_bytes)} while the kernels ran{measured}; "
        f"L2 → SM {decimal_bytes(p.l2_to_sm_bytes)}."
    )


def comparison(c) -> Group:
    """The `flashsim compare` report: errors, bytes predicted vs measured, time predicted vs measured."""
    cfg = c.config
    head = _headline(
        registry.recorded("forward", cfg["kernel"]).name,
        "flash2",
        cfg,
        f" (the simulator was given {human_bytes(cfg['sim_sram_bytes'])} of SRAM)",
    )
    err = _table("max |x − float64 reference|", ("", "simulator", "GPU"))
    err.add_row("O", abs_error(c.sim_err, 2), abs_error(c.gpu_err, 2))
    err.add_row("lse", abs_error(c.sim_lse_err, 2), abs_error(c.gpu_lse_err, 2))

    m, sw = c.counters, c.counters_swizzled
    copies = "TMA" if m and m.get("tma_bytes") else "cp.async"
    cols = ["", "predicted (simulator)", f"asked for ({copies})", "L2 → SMs", "measured/predicted"]
    cols += ["L2 → SMs, swizzled rows", "swizzled/predicted"] if sw else []
    io = _table("global-memory traffic, all heads", [*cols, "DRAM"])

    def cells(key, ratio_of, asked):
        out = [decimal_bytes(m[key]), number(m[key] / ratio_of, 3)] if m else ["—", "—"]
        out += [decimal_bytes(sw[key]), number(sw[key] / ratio_of, 3)] if sw else []
        return [asked, *out]

    asked = decimal_bytes(asked_bytes(m)) if m and asked_bytes(m) else "—"
    io.add_row("read", decimal_bytes(c.predicted_read), *cells("l2_read_bytes", c.predicted_read, asked),
               decimal_bytes(m["dram_read_bytes"]) if m else "—")  # fmt: skip
    io.add_row("write", decimal_bytes(c.predicted_write), *cells("l2_write_bytes", c.predicted_write, "—"),
               decimal_bytes(m["dram_write_bytes"]) if m else "—")  # fmt: skip

    t = _time_table(c)
    if c.roofline is not None and m:
        dram_s = (m["dram_read_bytes"] + m["dram_write_bytes"]) / c.roofline_hw_bandwidth
        floor = max(dram_s, c.roofline.compute_seconds)
        t.add_row(
            "roofline: measured DRAM bytes, same datasheet",
            short_time(floor),
            tflops(c.flops / floor / 1e12, 1),
        )
    t.add_row(
        "measured (CUDA events, median, back-to-back calls)",
        short_time(c.measured_ms / 1e3),
        tflops(c.flops / c.measured_ms / 1e9, 1),
    )
    if m:
        t.add_row(
            "measured (ncu gpu__time_duration, one launch)",
            short_time(m["kernel_ns"] / 1e9),
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
        uses = (
            "wgmma, the instruction that peak is measured with (FlashAttention-3's), but the"
            if registry.recorded("forward", cfg["kernel"]).rung == 6
            else "mma.sync, like FlashAttention-2, which reaches roughly two thirds of that peak, and the"
        )
        notes.append(
            f"The kernel runs at {percent(achieved)} of the {c.hardware} datasheet's dense {cfg['dtype']} peak, the Hopper "
            f"wgmma rate. {registry.recorded('forward', cfg['kernel']).name.capitalize()} uses {uses} softmax's exponentials and rescaling share the SM with the matmuls."
        )
    model = [_dram_note(c.prediction, *((m["dram_read_bytes"], m["dram_write_bytes"]) if m else (None, None)))]
    return Group(head, err, io, t, *(Text(n) for n in notes), *(model if c.prediction else []))


def backward_comparison(c) -> Group:
    """The `flashsim compare --backward` report: gradient errors, bytes per kernel predicted vs measured, time."""
    cfg = c.config
    head = _headline(f"backward {registry.recorded('backward', cfg['kernel']).name}", "flash2 backward", cfg)
    err = _table(
        "max |g − float64 reference|",
        ("", "GPU", f"standard ({cfg['dtype']})", "bound: 2·standard + 1e-3", "simulator (head 0)"),
    )
    for g in ("dq", "dk", "dv"):
        e = c.errors
        err.add_row(
            g,
            abs_error(e["gpu"][g], 2),
            abs_error(e["standard"][g], 2),
            abs_error(2 * e["standard"][g] + 1e-3, 2),
            abs_error(e["sim"][g], 2),
        )

    io = _table("global-memory traffic per kernel, all heads", ("kernel", "predicted read", "predicted write",
                "L2 → SMs", "SM writes", "SM reductions", "DRAM read", "DRAM write", "time (ncu)"))  # fmt: skip
    m = c.measured or {}
    launches = cfg.get("launches", 3)  # 2: rung 7 rounds dQ itself (gpu.backward.fused)
    names = list(m) or [None] * launches
    predicted = [counts for _, counts in c.predicted] + [None]  # rounding dQ has no counterpart in the listing
    labels = ["pre-pass: D, dQ = 0", "main: per K/V block", "dQ rounded to the storage dtype"]
    if launches == 2:
        labels = [labels[0], "main: per K/V block, dQ rounded by each query plane's last block"]
    for label, pred, name in zip(labels, predicted[:launches], names, strict=True):
        k = m.get(name)
        cells = [decimal_bytes(pred.hbm_read_bytes), decimal_bytes(pred.hbm_write_bytes)] if pred else ["—", "—"]
        keys = ("l2_read_bytes", "l2_write_bytes", "l2_reduction_bytes", "dram_read_bytes", "dram_write_bytes")
        cells += [decimal_bytes(k[key]) for key in keys] + [short_time(k["kernel_ns"] / 1e9)] if k else ["—"] * 6
        io.add_row(label, *cells)

    t = _time_table(c)
    t.add_row(
        f"measured (CUDA events, median; the {('two', 'three')[launches - 2]} kernels)",
        short_time(c.measured_ms / 1e3),
        tflops(c.flops / c.measured_ms / 1e9, 1),
    )

    spec = registry.rung(cfg["kernel"])
    bulk = spec.tma and not spec.default_tiles(cfg["d"]).dq_atomics  # rung 7: dQ_i's products added by TMA, in L2
    notes = [
        f"The simulator's listing reads and writes back dQ_i for every tile pair in {cfg['dtype']} "
        f"({decimal_bytes(c.predicted_dq_bytes)} each way); the kernel adds into a float32 copy with "
        f"{'TMA reduce-adds' if bulk else 'atomics'} instead, "
        f"{decimal_bytes(c.expected_reduction_bytes)} of reductions that L2 applies, never read back by the SMs, and "
        + ("the last thread block of each query plane rounds" if launches == 2 else "a third kernel rounds")
        + " the copy once."
    ]
    if m:
        main = m[names[1]]
        main_pred = c.predicted[1][1]
        reads = main_pred.hbm_read_bytes - c.predicted_dq_bytes
        notes.append(
            f"Main kernel: L2 → SM reads {_ratio(main['l2_read_bytes'], reads)} of the predicted reads without dQ_i; "
            f"reductions {_ratio(main['l2_reduction_bytes'], c.expected_reduction_bytes)} of the float32 dQ bytes; writes "
            f"{_ratio(main['l2_write_bytes'], main_pred.hbm_write_bytes - c.predicted_dq_bytes)} of dK and dV."
            + (
                " Rows padded by 16 bytes in shared memory make L1 take more from L2 than the kernel asks for, as in the "
                "forward's compare."
                if main["l2_read_bytes"] > 1.05 * reads
                else ""
            )
        )
    else:
        notes.append(c.note)
    dram = [sum(k[key] for k in m.values()) for key in ("dram_read_bytes", "dram_write_bytes")] if m else [None, None]
    model = [_dram_note(c.prediction, *dram)] if c.prediction else []
    return Group(head, err, io, t, *(Text(n) for n in notes), *model)
