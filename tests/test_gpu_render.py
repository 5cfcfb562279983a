"""The GPU renderers on hand-made reports (no GPU needed): every cell comes from the report."""

from rich.console import Console

from gpu.lab.plot import line_chart
from gpu.lab.render import bench_columns, bench_markdown, bench_table
from gpu.lab.render_train import checkpoints, training_table
from sim.algorithms import registry

ENV = {"date": "2026-11-23T12:00:00+00:00", "command": "flashsim bench gpu", "driver": "580.1", "cupy": "14.2.0",
       "torch": "2.11.0", "gpu": "Test GPU"}  # fmt: skip


def _report(kind: str) -> dict:
    row = {
        "n": 4096, "d": 64, "causal": True, "dtype": "bfloat16",
        "flash": {"tflops": 300.0, "peak_extra_bytes": 64 * 2**20},
        "sdpa": {"tflops": 250.0, "peak_extra_bytes": 64 * 2**20},
        "cudnn": {"tflops": 400.0, "peak_extra_bytes": 32 * 2**20},
        "default": {"status": "error", "why": "no kernel"},
        "standard": {"status": "OOM", "needs_bytes": 10**12},
        "rung1": {"status": "skipped"},
    }  # fmt: skip
    report = {
        "kind": kind,
        "env": ENV,
        "device": {"name": "Test GPU"},
        "torch": None,
        "notes": ["a note"],
        "rows": [row],
    }
    if kind == "bench-backward":
        del row["rung1"]
        row["flash"] |= {"ms": 2.0, "backward_tflops": 200.0}
        row["autograd"] = {"tflops": 290.0, "ms": 2.1, "peak_extra_bytes": 0}
        row["cudnn"]["backward_tflops"] = 320.0
        report["memory_config"] = "batch 1, 16 heads, d = 64, float16"
        report["memory"] = [{"n": 1024, "flash": {"peak_extra_bytes": 3 * 2**20}, "standard": {"status": "OOM"}}]
    return report


def _cells(line: str) -> list[str]:
    return line.strip("| ").split(" | ")


def test_forward_markdown_cells_come_from_the_report():
    report = _report("bench-forward")
    lines = bench_markdown(report).splitlines()
    assert lines[0] == "# `flashsim bench gpu` on Test GPU" and "- a note" in lines
    assert "`flashsim bench gpu`" in lines[2] and "driver 580.1" in lines[2]
    header, rule, row = lines[-3:]
    assert _cells(header) == [h for h, _ in bench_columns(report)]
    assert rule == "|" + "---|" * len(bench_columns(report))
    assert _cells(row) == [
        "bf16",
        "64",
        "yes",
        "4096",
        "300",
        "250",
        "400",
        "error",
        "1.20",
        "0.75",
        "—",
        "OOM",
        "—",
        "skipped",
        "64.0 MiB",
        "64.0 MiB",
        "OOM",
    ]


def test_backward_markdown_has_no_v1_and_a_memory_table():
    report = _report("bench-backward")
    text = bench_markdown(report)
    lines = text.splitlines()
    assert lines[0] == "# `flashsim bench gpu --backward` on Test GPU"
    header, _, row = lines[-9:-6]
    assert "rung 1" not in _cells(header)
    cells = dict(zip(_cells(header), _cells(row), strict=True))
    assert cells["autograd"] == "290" and cells["tax"] == "+5%"  # 2.1 ms against 2.0 ms
    assert (cells["/flash"], cells["/cuDNN"], cells["/default"]) == ("1.16", "0.72", "—")  # 290/250, 290/400
    assert (cells["bwd flashsim"], cells["bwd flash"], cells["bwd cuDNN"]) == ("200", "—", "320")
    assert _cells(lines[-1]) == ["1024", "3.0 MiB", "—", "OOM"]
    assert "batch 1, 16 heads, d = 64, float16" in text


def test_bench_table_renders_both_tables():
    console = Console(width=200, record=True)
    console.print(bench_table(_report("bench-backward")))
    out = console.export_text()
    assert "forward + backward on Test GPU" in out and "against N" in out and "3.0 MiB" in out


def test_training_table_shows_the_checkpoints_and_the_gap():
    losses = {"flash": [5.0 - 0.01 * i for i in range(100)], "standard": [5.0 - 0.01 * i + 0.002 for i in range(100)]}
    report = {
        "env": {"gpu": "Test GPU"},
        "config": {"steps": 100, "layers": 2, "d_model": 256, "heads": 4, "batch": 32, "seq": 256, "dtype": "bfloat16"},
        "text": "sim/**/*.py, 1,000 bytes",
        "losses": losses,
        "tokens_per_s": {"flash": 2_000_000.0, "standard": 1_000_000.0},
        "max_loss_gap": 0.002,
        "mean_loss_gap": 0.002,
    }
    console = Console(width=200, record=True)
    console.print(training_table(report))
    out = console.export_text()
    assert checkpoints(100) == [0, 25, 50, 75, 99]
    assert "5.0000" in out and "4.0100" in out and "2,000,000" in out and "2.00×" in out and "0.0020" in out


def test_training_table_sets_flashsim_beside_pytorchs_sdpa():
    steps = 20
    report = {
        "env": {"gpu": "Test GPU"},
        "config": {
            "steps": steps,
            "layers": 2,
            "d_model": 256,
            "heads": 4,
            "batch": 32,
            "seq": 256,
            "dtype": "bfloat16",
        },
        "text": "sim/**/*.py, 1,000 bytes",
        "losses": {impl: [5.0] * steps for impl in ("flash", "standard", "sdpa")},
        "tokens_per_s": {"flash": 1_200_000.0, "standard": 600_000.0, "sdpa": 1_500_000.0},
        "max_loss_gap": 0.0,
        "mean_loss_gap": 0.0,
    }
    console = Console(width=200, record=True)
    console.print(training_table(report))
    out = console.export_text()
    assert "PyTorch SDPA, its default backend" in out and "1,500,000" in out
    assert "at 0.80× the tokens/s of PyTorch's default SDPA" in out  # 1.2M / 1.5M


def test_line_chart_draws_each_series():
    svg = line_chart({"a": [3.0, 2.0, 1.0], "b <x>": [3.0, 2.5, 1.5]}, title="loss", x_label="step", y_label="loss")
    assert svg.startswith("<svg") and svg.count("<polyline") == 2 and "b &lt;x&gt;" in svg
    first = svg.split('points="')[1].split('"')[0].split()
    assert first[0] == "48.0,48.0" and first[-1] == "592.0,312.0"  # the first series spans the plot from max to min


def test_backward_comparison_explains_the_dq_traffic():
    """The simulator books dQ_i's read and write-back in fp16 per tile pair; the kernel's atomics add float32."""
    from gpu.lab.compare_backward import BackwardComparison
    from gpu.lab.render_compare import backward_comparison

    heads, n, d = 16, 2048, 64
    predicted = [(name, c.times(heads)) for name, c in registry.backward_kernels("flash2", n, n, d, 2, 64, 128, False)]
    config = dict(n=n, nk=n, d=d, batch=1, heads=heads, dtype="float16", causal=False, kernel=5, block_rows=64,
                  block_cols=128, smem_bytes=93184, itemsize=2, heads_total=heads, device="Test GPU")  # fmt: skip
    main = dict(l2_read_bytes=218103808, l2_write_bytes=9437184, l2_reduction_bytes=134217728,
                dram_read_bytes=0, dram_write_bytes=0, kernel_ns=2.09e5)  # fmt: skip
    other = {**main, "l2_reduction_bytes": 0, "kernel_ns": 8e3}
    measured = {"flash2_bwd_prepass": other, "flash2_v2_bwd": main, "flash2_bwd_dq": other}
    errors = {k: {"dq": 1e-4, "dk": 2e-4, "dv": 3e-4} for k in ("gpu", "standard", "sim")}
    c = BackwardComparison(config, errors, predicted, measured, "", 0.241, None, None, 2.5 * 4 * n * n * d * heads)
    # dQ_i is read and written once per tile pair: Tc = 16 K/V blocks × N × d × 2 bytes, every head (64·2²⁰ B)
    dq = 16 * n * d * 2 * heads
    assert c.predicted_dq_bytes == dq and c.expected_reduction_bytes == 2 * dq
    console = Console(width=250, record=True)
    console.print(backward_comparison(c))
    out = console.export_text()
    # bytes moved in decimal units: 64·2²⁰ B = 67.1 MB each way, 128·2²⁰ B = 134.2 MB of float32 reductions
    assert f"({dq / 1e6:.1f} MB each way)" in out and f"{2 * dq / 1e6:.1f} MB of reductions" in out
    main_row = next(line for line in out.splitlines() if "main: per K/V block" in line)
    for moved in (main["l2_read_bytes"], main["l2_write_bytes"], main["l2_reduction_bytes"]):
        assert f" {moved / 1e6:.1f} MB " in main_row  # 218.1, 9.4 and 134.2 MB (binary: 208.0, 9.0, 128.0 MiB)
    assert "MiB" not in out and f"{config['smem_bytes'] / 2**10:.1f} KiB shared memory per block" in out
    assert "a float32 copy with atomics instead" in " ".join(out.split())  # rung 5 adds dQ_i by atomics
    assert "reductions ×1.000 of the float32 dQ bytes" in out and "209 µs" in out and "3.00e-04" in out


def test_backward_comparison_of_a_fused_rung_7_has_two_kernels():
    """From 256 query planes rung 7 rounds dQ itself (gpu.backward.fused): two launches measured, two rows shown."""
    from gpu import backward
    from gpu import registry as gpu_registry
    from gpu.lab.compare_backward import BackwardComparison
    from gpu.lab.render_compare import backward_comparison

    seven = gpu_registry.rung(7)
    assert backward.fused(seven, seven.tiles(64), 256) and not backward.fused(seven, seven.tiles(64), 255)
    heads, n, d = 256, 1024, 64
    predicted = [(name, c.times(heads)) for name, c in registry.backward_kernels("flash2", n, n, d, 2, 128, 128, False)]
    config = dict(n=n, nk=n, d=d, batch=16, heads=16, dtype="float16", causal=False, kernel=7, block_rows=128,
                  block_cols=128, smem_bytes=200000, itemsize=2, heads_total=heads, device="Test GPU", launches=2)  # fmt: skip
    main = dict(l2_read_bytes=1.0e9, l2_write_bytes=1.0e8, l2_reduction_bytes=5.0e8, dram_read_bytes=0,
                dram_write_bytes=0, kernel_ns=4.0e5)  # fmt: skip
    measured = {"flash2_bwd_prepass": {**main, "l2_reduction_bytes": 0, "kernel_ns": 9.8e4}, "flash2_wgmma_bwd": main}
    errors = {k: {"dq": 1e-4, "dk": 2e-4, "dv": 3e-4} for k in ("gpu", "standard", "sim")}
    c = BackwardComparison(config, errors, predicted, measured, "", 0.5, None, None, 2.5 * 4 * n * n * d * heads)
    console = Console(width=250, record=True)
    console.print(backward_comparison(c))
    out = " ".join(console.export_text().split())  # the notes wrap
    assert "dQ rounded by each query plane's last block" in out and "dQ rounded to the storage dtype" not in out
    assert "a float32 copy with TMA reduce-adds instead" in out  # rung 7's default tiling: DQ_TMA
    assert "the two kernels" in out and "the last thread block of each query plane rounds the copy once" in out
    assert "400 µs" in out and "98 µs" in out  # each launch's ncu time (was "0.400" and "0.098", in ms)


def test_forward_comparison_prints_traffic_in_decimal_units_and_memory_in_binary():
    """`flashsim compare`: bytes moved (predicted, L2, DRAM, the machine model's) in MB; shared memory, the SRAM
    given to the simulator and L2's size in KiB/MiB."""
    from gpu import registry as gpu_registry
    from gpu.lab.compare import Comparison
    from gpu.lab.predict import rung_prediction
    from gpu.lab.render_compare import comparison
    from sim.machine import hardware, iomodel

    rung, h100 = gpu_registry.rung(6), hardware.get("H100-SXM")
    n, d, heads = 4096, 64, 16
    t = rung.default_tiles(d)
    predicted = iomodel.flash2(n, n, d, 2, t.block_rows, t.block_cols).times(heads)
    once = 3 * n * d * 2 * heads  # Q, K, V read once: 24·2²⁰ B = 25.2 MB
    measured = dict(l2_read_bytes=predicted.hbm_read_bytes, l2_write_bytes=predicted.hbm_write_bytes,
                    dram_read_bytes=once, dram_write_bytes=n * d * 2 * heads, cp_async_bytes=0.0,
                    tma_bytes=predicted.hbm_read_bytes, kernel_ns=1e5)  # fmt: skip
    config = dict(n=n, nk=n, d=d, batch=1, heads=heads, dtype="float16", causal=False, kernel=6, device="Test GPU",
                  block_rows=t.block_rows, block_cols=t.block_cols, smem_bytes=rung.smem(d, t),
                  sim_sram_bytes=rung.smem(d, t), l2_bytes=h100.l2_bytes)  # fmt: skip
    model = rung_prediction(rung, h100, n=n, nk=n, d=d, batch=1, heads=heads, s=2, causal=False)
    c = Comparison(config, 1e-4, 2e-4, 1e-5, 2e-5, predicted.hbm_read_bytes, predicted.hbm_write_bytes,
                   4.0 * n * n * d * heads, 0.2, None, None, measured, None, "", prediction=model)  # fmt: skip
    console = Console(width=250, record=True)
    console.print(comparison(c))
    text = console.export_text()
    out = " ".join(text.split())  # the notes wrap
    read = next(line for line in text.splitlines() if line[1:].lstrip().startswith("read │"))
    assert f"│ {predicted.hbm_read_bytes / 1e6:.1f} MB │" in read and read.endswith(f"│ {once / 1e6:.1f} MB │")
    assert f"DRAM read {model.dram_read_bytes / 1e6:.1f} MB" in out
    assert f"(measured {once / 1e6:.1f} MB and {n * d * 2 * heads / 1e6:.1f} MB)" in out  # 25.2 MB and 8.4 MB
    assert f"L2 → SM {model.l2_to_sm_bytes / 1e6:.1f} MB" in out
    smem = f"{rung.smem(d, t) / 2**10:.1f} KiB"  # memory: binary
    assert f"{smem} shared memory per block (the simulator was given {smem} of SRAM)" in out
    assert f"the GPU's {h100.l2_bytes / 2**20:.1f} MiB L2" in out


def test_a_variant_line_names_the_spilled_registers_bytes_stored_in_decimal_units():
    from gpu.lab.compare_variants import describe

    spilled = 3 * 2**20  # 3,145,728 B: 3.1 MB (binary: 3.0 MiB)
    row = {"d": 64, "case": "gqa 8", "direction": "backward", "kernel": 7, "ratio": {"read": 1.0, "write": 0.98},
           "measured": {"local_store_bytes": spilled}, "agrees": True}  # fmt: skip
    line = f"d=64 gqa 8 (rung 7): read ×1.000, write ×0.980; spilled registers: {spilled / 1e6:.1f} MB stored"
    assert describe(row) == line
