"""`flashsim bench sim | gpu | trace | grade`: time the simulator, the GPU kernels, the trace viewer and the grader."""

import click
from rich.console import Console

from sim import bench
from sim.cli import options
from sim.cli.options import console
from sim.grading.commands import bench_grade_command
from sim.viz import bench as bench_viz


@click.group("bench")
def bench_group() -> None:
    """Benchmarks: print a table, optionally write JSON."""


@bench_group.command("sim")
@options.n(4096, help="Sequence length of the timed runs.")
@options.d(64)
@options.dtype("fp16")
@click.option(
    "--repeats", type=options.POSITIVE, default=3, show_default=True, help="Timed repeats (the median is reported)."
)
@click.option(
    "--memory-n",
    type=click.IntRange(min=0),
    default=32768,
    show_default=True,
    help="N of the flash2 memory probe (0 skips it).",
)
@options.JSON_REPORT
def bench_sim_command(n, d, dtype, repeats, memory_n, json_path) -> None:
    """Time the simulator's full numerics against plain NumPy attention, and probe flash2's memory."""
    result = bench.bench_sim(n=n, d=d, dtype=dtype, repeats=repeats, memory_n=memory_n or None)
    console.print(bench_viz.sim_table(result))
    if json_path:
        bench.write_json(result, json_path)


@bench_group.command("gpu")
@click.option("--quick", is_flag=True, help="N ∈ {1024, 4096}, fp16 only (about a tenth of the full run).")
@options.JSON_REPORT
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Also write the table as Markdown.",
)
@options.backward("Time forward + backward (FLOPs = 3.5 × forward), and the memory against N.")
def bench_gpu_command(quick, json_path, markdown_path, backward) -> None:
    """Time the GPU kernels beside PyTorch SDPA (flash) and standard attention, FlashAttention-2's benchmark."""
    from gpu import bench as gpu_bench
    from gpu import render as gpu_render
    from gpu import results

    progress = Console(stderr=True, highlight=False)
    report = gpu_bench.run_bench(
        quick=quick,
        backward=backward,
        progress=lambda row: progress.print(gpu_render.bench_progress(row), style="dim"),
        command=options.command_line(),
    )
    console.print(gpu_render.bench_table(report))
    if json_path:
        results.write(report, json_path)
    if markdown_path:
        with open(markdown_path, "w") as f:
            f.write(gpu_render.bench_markdown(report))


@bench_group.command("trace")
@options.n(4096, help="N = Nk of the traced runs.")
@options.d(64)
@options.dtype("fp16")
@options.hardware()
@click.option("--keys", type=options.POSITIVE, default=50, show_default=True, help="Key presses timed after opening.")
@options.JSON_REPORT
def bench_trace_command(n, d, dtype, hardware_name, keys, json_path) -> None:
    """Time the trace viewer: record and open an N × N run of each algorithm, then answer key presses."""
    from sim.viewer import timing as viewer_timing
    from sim.viz import timing

    rows = viewer_timing.bench_open(n=n, d=d, dtype=dtype, hardware=hardware_name, keys=keys)
    console.print(timing.open_times(rows))
    if json_path:
        bench.write_json({"trace_viewer": rows}, json_path)


bench_group.add_command(bench_grade_command)

COMMANDS = (bench_group,)
