"""`flashsim bench sim | gpu | trace | grade`: time the simulator, the GPU kernels, the trace viewer and the grader."""

import click
from rich.console import Console

from sim.algorithms.registry import REGISTRY
from sim.api.inputs import configure_shape
from sim.cli import estimate, options
from sim.cli.grading import bench_grade_command
from sim.cli.options import console, emit_json
from sim.cli.progress import Work
from sim.core.atomic_file import write_text
from sim.core.format import count
from sim.lab import bench
from sim.viz import bench as bench_viz

SCREEN_SECONDS = 0.02  # the viewer drawing one 120 × 45 screen


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
@options.skippable_n("--memory-n", 32768, "N of the flash2 memory probe (0 skips it).")
@options.JSON_REPORT
@options.QUIET
@click.pass_context
def bench_sim_command(ctx, n, d, dtype, repeats, memory_n, json_path, quiet) -> None:
    """Time the simulator's full numerics against plain NumPy attention, and probe flash2's memory."""

    def cost(n, d, repeats, memory_n) -> estimate.Estimate:
        est = estimate.process() + estimate.numpy_attention(n, d).times(repeats + 1)
        for algorithm in REGISTRY:  # one run to read its blocks, a warm-up, then the timed repeats
            est += estimate.listing(_configure(algorithm, n, d, dtype)).times(repeats + 2)
        if memory_n:  # in a process of its own: its time adds up, its memory is that process's
            probe = estimate.listing(_configure("flash2", memory_n, d, dtype))
            est += estimate.Estimate(probe.seconds) + estimate.Estimate(transient=probe.bytes)
        return est

    times = f"{count(repeats)} time{'s' * (repeats != 1)} (after two untimed runs)"
    what = f"timing every algorithm at N = {count(n)}, d = {d}, {times}" + (
        f", and a flash2 run at N = {count(memory_n)}" if memory_n else ""
    )
    estimate.guard(ctx, cost, what, [], limit=estimate.BENCH_LIMIT_SECONDS, n=n, d=d, repeats=repeats,
                   memory_n=memory_n)  # fmt: skip
    with Work(quiet) as work, work.steps("timing", bench.bench_sim_calls(repeats, memory_n)) as advance:
        result = bench.bench_sim(n=n, d=d, dtype=dtype, repeats=repeats, memory_n=memory_n or None, advance=advance)
    if not emit_json(result, json_path):
        console.print(bench_viz.sim_table(result))


@bench_group.command("gpu")
@click.option("--quick", is_flag=True, help="N ∈ {1024, 4096}, fp16 only (about a tenth of the full run).")
@options.JSON_REPORT
@options.output_file("--markdown", "markdown_path", "Also write the table as Markdown.")
@options.backward(
    "Time forward + backward (FLOPs = 3.5 × forward; flashsim direct and through autograd; each backward alone), "
    "and the memory against N."
)
@options.kernel(
    (2, 3, 6),
    "Force this forward rung (rung 1 has its own column)  [default: the public call's choice for each d on this GPU]",
)
@click.option(
    "--variants", is_flag=True,
    help="Time the variants instead (GQA, windows, ALiBi, softcap, packed; with --backward the training step through "
    "autograd) beside SDPA and FlexAttention, a line a row as it is timed.",
)  # fmt: skip
@click.pass_context
def bench_gpu_command(ctx, quick, json_path, markdown_path, backward, kernel, variants) -> None:
    """Time the GPU kernels beside PyTorch SDPA (flash, cuDNN, its default) and standard attention, FlashAttention-2's
    benchmark."""
    kernel = None if kernel is None else int(kernel)
    progress = Console(stderr=True, highlight=False)
    if variants:  # gpu/lab/bench_variants.py: N = 4096 (and 8192 unless --quick), d = 64 and 128, fp16
        takes = ("variants", "quick", "json_path", "backward")
        options.only_with(ctx, "--variants", takes, "they time the public call, as lines or --json")
        from gpu.lab import bench_variants

        lines = progress if json_path == "-" else console  # each row as it is timed; stdout stays JSON's with --json -
        report = bench_variants.run_bench((4096,) if quick else (4096, 8192), backward=backward,
                                          progress=lambda line: lines.print(line, highlight=False),
                                          command=options.command_line())  # fmt: skip
        emit_json(report, json_path, indent=1)
        return
    from gpu.lab import bench as gpu_bench
    from gpu.lab import render as gpu_render

    report = gpu_bench.run_bench(
        quick=quick,
        backward=backward,
        kernel=kernel,
        progress=lambda row: progress.print(gpu_render.bench_progress(row), style="dim"),
        command=options.command_line(),
    )
    if not emit_json(report, json_path, indent=1):
        console.print(gpu_render.bench_table(report))
    if markdown_path:
        write_text(markdown_path, gpu_render.bench_markdown(report))


@bench_group.command("decode")
@click.option("--quick", is_flag=True, help="Three of the eight (batch, Nk) points.")
@options.JSON_REPORT
def bench_decode_command(quick, json_path) -> None:
    """Time rung 8 (gpu.decode, contiguous and paged) beside SDPA with enable_gqa at decode time, in DRAM GB/s."""
    from gpu.lab import bench_decode

    progress = Console(stderr=True, highlight=False)
    progress.print(bench_decode.heading(bench_decode.dram_peak()))
    report = bench_decode.run_bench(
        quick=quick,
        progress=lambda row: progress.print(bench_decode.progress_line(row)),
        command=options.command_line(),
    )
    if not emit_json(report, json_path, indent=1):
        console.print(bench_decode.heading(report["dram_peak"]))
        for row in report["rows"]:
            console.print(bench_decode.progress_line(row))


@bench_group.command("trace")
@options.n(4096, help="N = Nk of the traced runs.")
@options.d(64)
@options.dtype("fp16")
@options.hardware()
@click.option("--keys", type=options.POSITIVE, default=50, show_default=True, help="Key presses timed after opening.")
@options.JSON_REPORT
@click.pass_context
def bench_trace_command(ctx, n, d, dtype, hardware_name, keys, json_path) -> None:
    """Time the trace viewer: record and open an N × N run of each algorithm, then answer key presses."""
    from sim.viewer import timing as viewer_timing
    from sim.viz import timing

    def cost(n, d, keys) -> estimate.Estimate:
        est = estimate.process()
        for algorithm in REGISTRY:  # recorded one after another; each trace is let go before the next
            recorded = estimate.listing(_configure(algorithm, n, d, dtype, hardware_name), record=True)
            est += estimate.Estimate(recorded.seconds + keys * SCREEN_SECONDS, 0, recorded.bytes, recorded.steps)
        return est

    what = f"recording every algorithm at N = {count(n)}, d = {d} and pressing {count(keys)} keys in each"
    estimate.guard(ctx, cost, what, [], limit=estimate.BENCH_LIMIT_SECONDS, n=n, d=d, keys=keys)

    rows = viewer_timing.bench_open(n=n, d=d, dtype=dtype, hardware=hardware_name, keys=keys)
    if not emit_json({"trace_viewer": rows}, json_path):
        console.print(timing.open_times(rows))


@bench_group.command("cli")
@options.skippable_n("--n", 32768, "N of the full-numerics flash2 run (0 skips it).")
@options.d(64)
@click.option(
    "--counts-n",
    "counts_ns",
    type=options.POSITIVE,
    multiple=True,
    default=bench.COUNTS_NS,
    show_default=True,
    help="N of the --counts-only runs (repeat the option for several).",
)
@click.option(
    "--repeats",
    type=options.POSITIVE,
    default=5,
    show_default=True,
    help="Runs of each --counts-only command after a warm-up (the median is reported).",
)
@options.JSON_REPORT
@options.QUIET
@click.pass_context
def bench_cli_command(ctx, n, d, counts_ns, repeats, json_path, quiet) -> None:
    """Time the commands the README quotes in fresh processes: flash2 at N (peak memory too), --counts-only at each
    --counts-n, every algorithm, forward and --backward."""

    def cost(n, d, repeats) -> estimate.Estimate:
        run = (
            estimate.listing(_configure("flash2", n, d, "fp16")) + estimate.check(n, n, d) if n else estimate.Estimate()
        )
        counting = estimate.PROCESS_SECONDS * (repeats + 1) * len(bench.cli_commands(None, d, counts_ns))
        return estimate.Estimate(run.seconds + counting, 0, run.bytes)

    runs = f"{count(repeats)} timed run{'s' * (repeats != 1)} (after a warm-up) of each count at N = "
    what = (f"a flash2 run at N = {count(n)}, d = {d}, and " if n else "") + runs + ", ".join(map(count, counts_ns))
    estimate.guard(ctx, cost, what, [], limit=estimate.BENCH_LIMIT_SECONDS, n=n, d=d, repeats=repeats)
    commands = len(bench.cli_commands(n or None, d, counts_ns))
    with Work(quiet) as work, work.steps("timing commands", commands) as advance:
        result = bench.bench_cli(n=n or None, d=d, counts_ns=counts_ns, repeats=repeats, advance=advance)
    if not emit_json(result, json_path):
        console.print(bench_viz.cli_table(result))


def _configure(algorithm: str, n: int, d: int, dtype: str, hardware_name: str | None = None) -> dict:
    """The blocks `sim.run` picks for an N × N run of one head (a benchmark's)."""
    return configure_shape(algorithm, False, 1, n, n, d, dtype, None, False, None, None, "fit", None, hardware_name)


bench_group.add_command(bench_grade_command)

COMMANDS = (bench_group,)
