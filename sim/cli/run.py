"""`flashsim run`, `trace` and `compare`: one simulated run, reported, stepped through, or set beside a GPU kernel."""

import sys

import click
import numpy as np
from click.core import ParameterSource
from rich.console import Console

import sim
from sim import hardware, reference, report, training
from sim.cli import options
from sim.cli.options import console, print_json
from sim.errors import InputError
from sim.inputs import random_inputs
from sim.viz import backward as backward_viz
from sim.viz import run as run_viz

TOY_MAX_N, TOY_MAX_D = 64, 16  # `trace` runs on the toy part up to this size unless --hardware says otherwise
RUN_OPTIONS = ("algo", "backward", "n", "nk", "d", "dtype", "causal", "scale", "block_rows", "block_cols", "blocks",
               "sram_bytes", "hardware_name", "seed")  # fmt: skip


def chip_options(causal, scale, block_rows, block_cols, blocks, sram_bytes, hardware_name) -> dict:
    """The keyword arguments of `sim.run`, `sim.count` and `sim.backward` that the shared options give."""
    return dict(
        causal=causal, scale=scale, block_rows=block_rows, block_cols=block_cols, blocks=blocks,
        sram_bytes=sram_bytes, hardware=hardware_name,
    )  # fmt: skip


@click.command("run")
@options.algo()
@options.n(1024)
@options.nk()
@options.d(64)
@options.batch(1)
@options.heads(1)
@options.dtype("fp16")
@options.causal()
@options.SCALE
@options.BLOCK_ROWS
@options.BLOCK_COLS
@options.blocks("Rule for blocks not given: the largest that fit, or the paper's Bc = ⌈M/4d⌉, Br = min(Bc, d).")
@options.SRAM_BYTES
@options.hardware()
@options.SEED
@click.option("--counts-only", is_flag=True, help="Count bytes and FLOPs only (one head simulated; no error check).")
@options.backward("Also run the backward pass (upstream gradient dO seeded at random).")
@options.json_flag()
def run_command(
    algo, n, nk, d, batch, heads, dtype, causal, scale, block_rows, block_cols, blocks, sram_bytes, hardware_name,
    seed, counts_only, backward, as_json,
) -> None:  # fmt: skip
    """Simulate one attention forward pass on seeded random inputs and report its traffic."""
    if blocks == "paper" and (block_rows or block_cols):
        raise InputError("--blocks paper: cannot be combined with --block-rows/--block-cols")
    nk = nk or n
    chip = chip_options(causal, scale, block_rows, block_cols, blocks, sram_bytes, hardware_name)
    shape = dict(n=n, nk=nk, d=d, batch=batch, heads=heads, dtype=dtype)
    if counts_only:
        result, err = sim.count(algo, **shape, **chip), None
    else:
        q, k, v = random_inputs(batch, heads, n, nk, d, dtype, seed)
        result = sim.run(algo, q, k, v, **chip)
        err = report.max_abs_error(result, q, k, v)
    summary = report.run_report(result, batch=batch, heads=heads, max_abs_err=err)
    if backward:
        if counts_only:
            grads, grad_err = sim.count_backward(algo, **shape, **chip), None
        else:
            grads, grad_err = run_backward(algo, result, q, k, v, seed, chip)
        summary["backward"] = training.backward_report(grads, grad_err)
        summary["forward_backward"] = training.split(result, grads)
    if as_json:
        print_json(summary)
        return
    console.print(run_viz.run_table(summary))
    if backward:
        console.print(backward_viz.backward_table(summary))


def run_backward(algo, result, q, k, v, seed, chip):
    """The backward pass of a `run` on a seeded random dO, and its errors against the float64 reference."""
    do = np.random.default_rng(seed + 1).standard_normal(q.shape).astype(q.dtype)
    stats = {"flash1": result.stats, "flash2": result.lse}.get(algo)
    if stats is None:  # standard attention leaves P in HBM, not L: hand the backward L to rebuild it from
        stats = reference.attention(q, k, v, causal=result.causal, scale=result.scale)[1]
    grads = sim.backward(algo, q, k, v, result.output, stats, do, **chip)
    return grads, training.gradient_errors(grads, q, k, v, do)


@click.command("trace")
@options.algo()
@options.backward("Trace the algorithm's backward pass instead of its forward.")
@options.n(16)
@options.nk()
@options.d(4)
@options.dtype("fp32")
@options.causal()
@options.SCALE
@options.BLOCK_ROWS
@options.BLOCK_COLS
@options.blocks("Rule for blocks not given.")  # shorter than run's
@options.SRAM_BYTES
@options.hardware(
    "toy",
    f"GPU preset  [default: toy (1 KiB of SRAM) up to N, Nk = {TOY_MAX_N} and d = {TOY_MAX_D}; {hardware.DEFAULT} beyond]",
    show_default=False,
)  # unlike every other command's: the toy part for small runs
@options.SEED
@click.option(
    "--load", "load_path", type=click.Path(dir_okay=False), default=None, help="Open a trace saved with --json."
)
@click.option(
    "--row",
    type=int,
    default=None,
    help="Record query row R's values (without it, runs past N, Nk, d = 16 record none).",
)
@click.option("--step", type=int, default=None, help="Print step K's screen (or export it) and exit.")
@click.option("--play", is_flag=True, help="Animate the run (tile pair by tile pair for big runs).")
@click.option(
    "--delay", type=click.FloatRange(min=0), default=0.5, show_default=True, help="Seconds per frame of --play."
)
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write the trace (versioned JSON)."
)  # a file, not stdout: unlike run's --json flag
@click.option(
    "--svg",
    "svg_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write --step K's screen, or the listing, as SVG.",
)
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None, help="The same as HTML.")
@click.option(
    "--width",
    type=click.IntRange(min=60),
    default=None,
    help="Columns to print and export in  [default: the terminal's; 120 for exports]",
)
@click.pass_context
def trace_command(
    ctx, algo, backward, n, nk, d, dtype, causal, scale, block_rows, block_cols, blocks, sram_bytes, hardware_name,
    seed, load_path, row, step, play, delay, json_path, svg_path, html_path, width,
) -> None:  # fmt: skip
    """Step through a simulated run: the tiles in SRAM, the paper's line, the running statistics, the bytes moved.

    In a terminal the viewer takes keys (shown on screen); piped, it prints a plain listing.
    """
    from sim.viewer import export, terminal, traces
    from sim.viz import listing, screen, timeline

    if step is not None and play:
        raise InputError("--step, --play: choose one")
    if load_path:
        given = [o for o in RUN_OPTIONS if ctx.get_parameter_source(o) is ParameterSource.COMMANDLINE]
        if given:
            option = given[0].removesuffix("_name").replace("_", "-")
            raise InputError(f"--load: the trace file fixes the run; drop --{option}")
        trace = traces.load(load_path, row)
    else:
        toy_is_too_small = max(n, nk or n) > TOY_MAX_N or d > TOY_MAX_D  # blocks of a few rows: too many steps to watch
        if ctx.get_parameter_source("hardware_name") is ParameterSource.DEFAULT and toy_is_too_small:
            hardware_name = hardware.DEFAULT
        q, k, v = (x[0, 0] for x in random_inputs(1, 1, n, nk or n, d, dtype, seed))
        record = traces.record_backward if backward else traces.record
        chip = chip_options(causal, scale, block_rows, block_cols, blocks, sram_bytes, hardware_name)
        trace = record(algo, q, k, v, row=row, **chip)
    view = timeline.Timeline(trace)
    traces.check_step(view, step)
    if json_path:
        trace.save(json_path)
        console.print(f"wrote {json_path}: the trace, {len(view)} steps (flashsim trace --load {json_path} opens it)")
    for path, kind in ((svg_path, "svg"), (html_path, "html")):
        if path:
            shown = listing.listing(view) if step is None else screen.screen(view, step)
            export.write(shown, path, kind, width or 120, f"flashsim trace {screen.run_title(view)}")
            console.print(f"wrote {path}: " + ("the listing" if step is None else f"step {step}"))
    if json_path or svg_path or html_path:
        return
    out = Console(highlight=False, width=width) if width else console
    if step is not None:
        out.print(screen.screen(view, step))
    elif sys.stdin.isatty() and sys.stdout.isatty():
        if play:
            terminal.play(view, console, delay)
        else:
            terminal.interact(view, console)
    else:
        out.print(listing.listing(view))


@click.command("compare")
@options.n(2048)
@options.nk()
@options.d(64, type=click.IntRange(1, 128))  # the kernels' d ≤ 128
@options.batch(1)
@options.heads(16)
@options.dtype("fp16", choices=("fp16", "bf16"))  # the kernels' dtypes
@options.causal()
@click.option(
    "--kernel", type=click.Choice(["v1", "v2", "v3"]), default=None, help="GPU kernel  [default: the default kernel]"
)
@options.backward("Compare the backward pass (its kernels: v1 or v2).")
@click.option("--no-counters", is_flag=True, help="Do not run Nsight Compute (time only).")
@options.JSON_REPORT
def compare_command(n, nk, d, batch, heads, dtype, causal, kernel, backward, no_counters, json_path) -> None:
    """Run the simulator with a GPU kernel's own tiling and the kernel on the same inputs: errors, bytes, time."""
    from gpu import compare as gpu_compare
    from gpu import compare_backward as gpu_compare_backward
    from gpu import render_compare, results

    module = gpu_compare_backward if backward else gpu_compare
    result = (module.compare_backward if backward else module.compare)(
        n=n, nk=nk or n, d=d, batch=batch, heads=heads, dtype=dtype, causal=causal, kernel=kernel,
        profile=not no_counters,
    )  # fmt: skip
    console.print((render_compare.backward_comparison if backward else render_compare.comparison)(result))
    if json_path:
        results.write(module.report(result, options.command_line()), json_path)


COMMANDS = (run_command, trace_command, compare_command)
