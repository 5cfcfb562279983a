"""The `flashsim` command: small functions that call the library and hand its results to `sim.viz`."""

import json
import sys

import click
import numpy as np
from rich.console import Console

import sim
from sim import bench, hardware, paper, reference, report, sweep, training, walkthrough
from sim.algorithms import decoding
from sim.dtypes import DTYPES
from sim.errors import FlashsimError, InputError
from sim.grading import commands as grading_commands
from sim.viz import backward as backward_viz
from sim.viz import bench as bench_viz
from sim.viz import decode as decode_viz
from sim.viz import paper as paper_viz
from sim.viz import run as run_viz
from sim.viz import sweep as sweep_viz
from sim.viz import walkthrough as walkthrough_viz

console = Console(highlight=False)


_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click ≥ 8.2


class _Group(click.Group):
    """Reports usage errors and `FlashsimError`s on one line to stderr with exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args, prog_name or "flashsim", complete_var, standalone_mode=False, **extra)
        except _NO_ARGS_IS_HELP as e:  # a bare `flashsim` or `flashsim bench`: show the help, not an error
            click.echo(e.ctx.get_help())
            sys.exit(0)
        except click.UsageError as e:
            where = f"{e.ctx.command_path}: " if e.ctx else ""
            fail(f"{where}{e.format_message()}")
        except FlashsimError as e:
            fail(str(e))
        except click.exceptions.Abort:
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


def fail(message: str) -> None:
    """Print `error: message` on one line to stderr and exit with code 2."""
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"error: {message}", markup=False)
    sys.exit(2)


@click.group("flashsim", cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
def app() -> None:
    """flashsim: FlashAttention, made visible."""


@app.group("bench")
def bench_app() -> None:
    """Benchmarks: print a table, optionally write JSON."""


ALGORITHM = click.Choice(["standard", "flash1", "flash2"])
DTYPE = click.Choice(list(DTYPES))
HARDWARE = click.Choice(list(hardware.PRESETS), case_sensitive=False)
POSITIVE = click.IntRange(min=1)
NK = click.option("--nk", type=POSITIVE, default=None, help="Key/value rows Nk  [default: N]")
CAUSAL = click.option("--causal", is_flag=True, help="Causal mask, aligned bottom-right when N ≠ Nk.")
SCALE = click.option("--scale", type=float, default=None, help="Softmax scale τ  [default: 1/√d]")
BLOCK_ROWS = click.option("--block-rows", type=POSITIVE, default=None, help="Br: rows of a Q block.")
BLOCK_COLS = click.option("--block-cols", type=POSITIVE, default=None, help="Bc: rows of a K/V block.")
SRAM_BYTES = click.option("--sram-bytes", type=POSITIVE, default=None, help="SRAM capacity  [default: the hardware's]")
SEED = click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
JSON_REPORT = click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Also write the report here.",
)


def random_inputs(batch: int, heads: int, n: int, nk: int, d: int, dtype: str, seed: int):
    """Seeded standard-normal q (batch, heads, n, d) and k, v (batch, heads, nk, d) in the storage dtype."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((batch, heads, rows, d)).astype(DTYPES[dtype]) for rows in (n, nk, nk))


def print_json(obj) -> None:
    """One JSON object on stdout (infinities as ±Infinity, as Python's json writes them)."""
    sys.stdout.write(json.dumps(obj) + "\n")


@app.command("run")
@click.option("--algo", type=ALGORITHM, default="flash2", show_default=True, help="Algorithm to simulate.")
@click.option("--n", type=POSITIVE, default=1024, show_default=True, help="Query rows N.")
@NK
@click.option("--d", type=POSITIVE, default=64, show_default=True, help="Head dimension d.")
@click.option("--batch", type=POSITIVE, default=1, show_default=True)
@click.option("--heads", type=POSITIVE, default=1, show_default=True)
@click.option("--dtype", type=DTYPE, default="fp16", show_default=True, help="Storage dtype (on-chip math is fp32).")
@CAUSAL
@SCALE
@BLOCK_ROWS
@BLOCK_COLS
@click.option(
    "--blocks", type=click.Choice(["fit", "paper"]), default="fit", show_default=True,
    help="Rule for blocks not given: the largest that fit, or the paper's Bc = ⌈M/4d⌉, Br = min(Bc, d).",
)  # fmt: skip
@SRAM_BYTES
@click.option("--hardware", "hardware_name", type=HARDWARE, default=hardware.DEFAULT, show_default=True)
@SEED
@click.option("--counts-only", is_flag=True, help="Count bytes and FLOPs only (one head simulated; no error check).")
@click.option("--backward", is_flag=True, help="Also run the backward pass (upstream gradient dO seeded at random).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
def run_command(
    algo, n, nk, d, batch, heads, dtype, causal, scale, block_rows, block_cols, blocks, sram_bytes, hardware_name,
    seed, counts_only, backward, as_json,
) -> None:  # fmt: skip
    """Simulate one attention forward pass on seeded random inputs and report its traffic."""
    if blocks == "paper" and (block_rows or block_cols):
        raise InputError("--blocks paper: cannot be combined with --block-rows/--block-cols")
    nk = nk or n
    options = dict(
        causal=causal, scale=scale, block_rows=block_rows, block_cols=block_cols, blocks=blocks,
        sram_bytes=sram_bytes, hardware=hardware_name,
    )  # fmt: skip
    if counts_only:
        result = sim.count(algo, n=n, nk=nk, d=d, batch=batch, heads=heads, dtype=dtype, **options)
        err = None
    else:
        q, k, v = random_inputs(batch, heads, n, nk, d, dtype, seed)
        result = sim.run(algo, q, k, v, **options)
        err = report.max_abs_error(result, q, k, v)
    summary = report.run_report(result, batch=batch, heads=heads, max_abs_err=err)
    if backward:
        if counts_only:
            grads, grad_err = (
                sim.count_backward(algo, n=n, nk=nk, d=d, batch=batch, heads=heads, dtype=dtype, **options),
                None,
            )
        else:
            grads, grad_err = run_backward(algo, result, q, k, v, seed, options)
        summary["backward"] = training.backward_report(grads, grad_err)
        summary["forward_backward"] = training.split(result, grads)
    if as_json:
        print_json(summary)
    else:
        console.print(run_viz.run_table(summary))
        if backward:
            console.print(backward_viz.backward_table(summary))


def run_backward(algo, result, q, k, v, seed, options):
    """The backward pass of a `run` on a seeded random dO, and its errors against the float64 reference."""
    do = np.random.default_rng(seed + 1).standard_normal(q.shape).astype(q.dtype)
    stats = {"flash1": result.stats, "flash2": result.lse}.get(algo)
    if stats is None:  # standard attention leaves P in HBM, not L: hand the backward L to rebuild it from
        stats = reference.attention(q, k, v, causal=result.causal, scale=result.scale)[1]
    grads = sim.backward(algo, q, k, v, result.output, stats, do, **options)
    return grads, training.gradient_errors(grads, q, k, v, do)


@app.command("walkthrough")
@click.option("--json", "as_json", is_flag=True, help="Print the whole trace as JSON.")
def walkthrough_command(as_json) -> None:
    """FlashAttention step by step on N = 4 queries and keys with blocks of 2 (in a terminal, in the trace viewer)."""
    flash = walkthrough.flash()
    if as_json:
        print_json(flash.trace.to_dict())
        return
    ref, _ = reference.attention(walkthrough.Q, walkthrough.K, walkthrough.V)
    standard = walkthrough.standard()
    if sys.stdin.isatty() and sys.stdout.isatty():  # in a terminal: the trace viewer, then the comparison
        from sim import viewer
        from sim.viz.timeline import Timeline

        viewer.interact(Timeline(flash.trace), console)
        console.print(walkthrough_viz.ending(flash, standard, ref))
        return
    console.print(walkthrough_viz.walkthrough(flash, standard, ref, walkthrough.Q, walkthrough.K, walkthrough.V))


@bench_app.command("sim")
@click.option("--n", type=POSITIVE, default=4096, show_default=True, help="Sequence length of the timed runs.")
@click.option("--d", type=POSITIVE, default=64, show_default=True)
@click.option("--dtype", type=DTYPE, default="fp16", show_default=True)
@click.option("--repeats", type=POSITIVE, default=3, show_default=True, help="Timed repeats (the median is reported).")
@click.option(
    "--memory-n",
    type=click.IntRange(min=0),
    default=32768,
    show_default=True,
    help="N of the flash2 memory probe (0 skips it).",
)
@JSON_REPORT
def bench_sim_command(n, d, dtype, repeats, memory_n, json_path) -> None:
    """Time the simulator's full numerics against plain NumPy attention, and probe flash2's memory."""
    result = bench.bench_sim(n=n, d=d, dtype=dtype, repeats=repeats, memory_n=memory_n or None)
    console.print(bench_viz.sim_table(result))
    if json_path:
        bench.write_json(result, json_path)


@bench_app.command("gpu")
@click.option("--quick", is_flag=True, help="N ∈ {1024, 4096}, fp16 only (about a tenth of the full run).")
@JSON_REPORT
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Also write the table as Markdown.",
)
def bench_gpu_command(quick, json_path, markdown_path) -> None:
    """Time the GPU kernels beside PyTorch SDPA (flash) and standard attention, FlashAttention-2's benchmark."""
    from gpu import bench as gpu_bench
    from gpu import render as gpu_render

    progress = Console(stderr=True, highlight=False)
    report = gpu_bench.run_bench(
        quick=quick, progress=lambda row: progress.print(gpu_render.bench_progress(row), style="dim")
    )
    console.print(gpu_render.bench_table(report))
    if json_path:
        gpu_bench.write_json(report, json_path)
    if markdown_path:
        with open(markdown_path, "w") as f:
            f.write(gpu_render.bench_markdown(report))


@app.command("compare")
@click.option("--n", type=POSITIVE, default=2048, show_default=True, help="Query rows N.")
@NK
@click.option("--d", type=click.IntRange(1, 128), default=64, show_default=True, help="Head dimension d.")
@click.option("--batch", type=POSITIVE, default=1, show_default=True)
@click.option("--heads", type=POSITIVE, default=16, show_default=True)
@click.option("--dtype", type=click.Choice(["fp16", "bf16"]), default="fp16", show_default=True)
@CAUSAL
@click.option("--kernel", type=click.Choice(["v1", "v2"]), default="v2", show_default=True, help="GPU kernel.")
@click.option("--no-counters", is_flag=True, help="Do not run Nsight Compute (time only).")
def compare_command(n, nk, d, batch, heads, dtype, causal, kernel, no_counters) -> None:
    """Run the simulator with a GPU kernel's own tiling and the kernel on the same inputs: errors, bytes, time."""
    from gpu import compare as gpu_compare
    from gpu import render as gpu_render

    result = gpu_compare.compare(
        n=n,
        nk=nk or n,
        d=d,
        batch=batch,
        heads=heads,
        dtype=dtype,
        causal=causal,
        kernel=kernel,
        profile=not no_counters,
    )
    console.print(gpu_render.comparison(result))


TOY_MAX_N, TOY_MAX_D = 64, 16  # `trace` runs on the toy part up to this size unless --hardware says otherwise


@app.command("trace")
@click.option("--algo", type=ALGORITHM, default="flash2", show_default=True, help="Algorithm to simulate.")
@click.option("--backward", is_flag=True, help="Trace the algorithm's backward pass instead of its forward.")
@click.option("--n", type=POSITIVE, default=16, show_default=True, help="Query rows N.")
@NK
@click.option("--d", type=POSITIVE, default=4, show_default=True, help="Head dimension d.")
@click.option("--dtype", type=DTYPE, default="fp32", show_default=True, help="Storage dtype (on-chip math is fp32).")
@CAUSAL
@SCALE
@BLOCK_ROWS
@BLOCK_COLS
@click.option(
    "--blocks", type=click.Choice(["fit", "paper"]), default="fit", show_default=True, help="Rule for blocks not given."
)
@SRAM_BYTES
@click.option(
    "--hardware", "hardware_name", type=HARDWARE, default="toy",
    help=f"GPU preset  [default: toy (1 KiB of SRAM) up to N, Nk = {TOY_MAX_N} and d = {TOY_MAX_D}; {hardware.DEFAULT} beyond]",
)  # fmt: skip
@SEED
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
)
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
    from click.core import ParameterSource

    from sim import viewer
    from sim.viz import listing, screen, timeline

    if step is not None and play:
        raise InputError("--step, --play: choose one")
    if load_path:
        run_options = ("algo", "backward", "n", "nk", "d", "dtype", "causal", "scale", "block_rows", "block_cols",
                       "blocks", "sram_bytes", "hardware_name", "seed")  # fmt: skip
        given = [o for o in run_options if ctx.get_parameter_source(o) is ParameterSource.COMMANDLINE]
        if given:
            option = given[0].removesuffix("_name").replace("_", "-")
            raise InputError(f"--load: the trace file fixes the run; drop --{option}")
        trace = viewer.load(load_path, row)
    else:
        toy_is_too_small = max(n, nk or n) > TOY_MAX_N or d > TOY_MAX_D  # blocks of a few rows: too many steps to watch
        if ctx.get_parameter_source("hardware_name") is ParameterSource.DEFAULT and toy_is_too_small:
            hardware_name = hardware.DEFAULT
        q, k, v = (x[0, 0] for x in random_inputs(1, 1, n, nk or n, d, dtype, seed))
        options = dict(
            causal=causal, scale=scale, block_rows=block_rows, block_cols=block_cols, blocks=blocks,
            sram_bytes=sram_bytes, hardware=hardware_name,
        )  # fmt: skip
        record = viewer.record_backward if backward else viewer.record
        trace = record(algo, q, k, v, row=row, **options)
    view = timeline.Timeline(trace)
    viewer.check_step(view, step)
    if json_path:
        trace.save(json_path)
        console.print(f"wrote {json_path}: the trace, {len(view)} steps (flashsim trace --load {json_path} opens it)")
    for path, kind in ((svg_path, "svg"), (html_path, "html")):
        if path:
            shown = listing.listing(view) if step is None else screen.screen(view, step)
            viewer.export(shown, path, kind, width or 120, f"flashsim trace {screen.run_title(view)}")
            console.print(f"wrote {path}: " + ("the listing" if step is None else f"step {step}"))
    if json_path or svg_path or html_path:
        return
    out = Console(highlight=False, width=width) if width else console
    if step is not None:
        out.print(screen.screen(view, step))
    elif sys.stdin.isatty() and sys.stdout.isatty():
        if play:
            viewer.play(view, console, delay)
        else:
            viewer.interact(view, console)
    else:
        out.print(listing.listing(view))


# -- the paper's Figure 2, the roofline sweep, Flash-Decoding --------------------------------


class _IntList(click.ParamType):
    """A comma-separated list of positive integers, such as 512,1024,2048."""

    name = "N[,N…]"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        try:
            items = tuple(int(x) for x in str(value).split(","))
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of integers", param, ctx)
        if min(items) < 1:
            self.fail(f"{value!r}: every value must be at least 1", param, ctx)
        return items


INTS = _IntList()


@app.group("paper")
def paper_app() -> None:
    """The FlashAttention paper's figures, reproduced by counting."""


@paper_app.command("fig2")
@click.option(
    "--hardware",
    "hardware_name",
    type=HARDWARE,
    default="A100-40GB",
    show_default=True,
    help="GPU of the time estimate.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the tables.")
def paper_fig2_command(hardware_name, as_json) -> None:
    """Figure 2: GPT-2 medium attention, forward + backward, standard vs FlashAttention, beside the paper's numbers."""
    fig = paper.figure2(hardware_name)
    if as_json:
        print_json(fig.to_dict())
    else:
        console.print(paper_viz.figure2(fig))


@app.command("sweep")
@click.option(
    "--n",
    "ns",
    type=INTS,
    default="512,1024,2048,4096,8192,16384,32768,65536",
    show_default=True,
    help="Sequence lengths N = Nk.",
)
@click.option("--d", "ds", type=INTS, default="64", show_default=True, help="Head dimensions.")
@click.option(
    "--block",
    "block_sizes",
    type=INTS,
    default=None,
    help="FlashAttention blocks Br = Bc  [default: the largest that fit]",
)
@click.option("--sram-bytes", "srams", type=INTS, default=None, help="SRAM sizes  [default: the hardware's]")
@click.option("--batch", type=POSITIVE, default=16, show_default=True)
@click.option("--heads", type=POSITIVE, default=16, show_default=True)
@click.option("--dtype", type=DTYPE, default="fp16", show_default=True)
@click.option("--hardware", "hardware_name", type=HARDWARE, default=hardware.DEFAULT, show_default=True)
@click.option("--causal", is_flag=True, help="Causal mask (FlashAttention-2 skips the hidden blocks).")
@click.option(
    "--algo",
    type=click.Choice(["flash1", "flash2"]),
    default="flash2",
    show_default=True,
    help="FlashAttention variant.",
)
@click.option("--backward", is_flag=True, help="Forward + backward  [default: the forward pass]")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV instead of the table.")
@click.option(
    "--plot", "plot_path", type=click.Path(dir_okay=False), default=None, help="Also write a figure (needs matplotlib)."
)
def sweep_command(
    ns, ds, block_sizes, srams, batch, heads, dtype, hardware_name, causal, algo, backward, as_json, as_csv, plot_path
) -> None:
    """Standard attention vs FlashAttention as N grows: bytes, FLOPs, intensity, roofline time, and where S and P run out of memory."""
    if as_json and as_csv:
        raise InputError("--json, --csv: choose one of them")
    sw = sweep.sweep(
        ns, ds=ds, blocks=block_sizes or (None,), srams=srams or (None,), batch=batch, heads=heads, dtype=dtype,
        hardware=hardware_name, causal=causal, algorithm=algo, backward=backward,
    )  # fmt: skip
    if plot_path:
        sweep_viz.plot(sw, plot_path)
    if as_json:
        print_json(sw.to_dict())
    elif as_csv:
        sys.stdout.write(sw.to_csv())
    else:
        console.print(sweep_viz.table(sw))


@app.command("decode")
@click.option("--nk", type=POSITIVE, default=32768, show_default=True, help="Keys in the K/V cache.")
@click.option("--queries", type=POSITIVE, default=1, show_default=True, help="Query rows (new tokens).")
@click.option("--d", type=POSITIVE, default=128, show_default=True, help="Head dimension d.")
@click.option("--batch", type=POSITIVE, default=1, show_default=True)
@click.option("--heads", type=POSITIVE, default=16, show_default=True)
@click.option("--dtype", type=DTYPE, default="fp16", show_default=True)
@click.option("--hardware", "hardware_name", type=HARDWARE, default=hardware.DEFAULT, show_default=True)
@click.option(
    "--splits", type=INTS, default=None, help="Numbers of splits to compare  [default: 1, 2, 4, … and the best]"
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
def decode_command(nk, queries, d, batch, heads, dtype, hardware_name, splits, as_json) -> None:
    """Flash-Decoding: how many SMs one thread block per (batch, head) keeps busy, and splitting the K/V cache."""
    hw, s = hardware.get(hardware_name), DTYPES[dtype].itemsize
    if splits and max(splits) > nk:
        raise InputError(f"--splits: {max(splits)} chunks of the {nk} keys would leave some empty; choose 1 … {nk}")
    best = decoding.best_splits(batch, heads, queries, nk, d, s, hw)
    options = splits or sorted({1, best, *(2**i for i in range(1, 8) if 2**i <= min(nk, 2 * best))})
    rows = [decoding.occupancy(batch, heads, P, queries, nk, d, s, hw) for P in options]
    q, k, v = random_inputs(1, 1, queries, nk, d, dtype, 0)
    one = sim.decode(q, k, v, splits=best, hardware=hw)  # one head through the simulator, against float64
    err = float(np.abs(one.output.astype(np.float64) - reference.attention(q, k, v)[0]).max())
    if as_json:
        config = dict(nk=nk, queries=queries, d=d, batch=batch, heads=heads, dtype=dtype, hardware=hw.name)
        table = [dict(splits=r.splits, blocks=r.blocks, busy_sms=r.busy, waves=r.waves, utilization=r.utilization,
                      hbm_bytes=r.hbm_bytes, seconds=r.seconds) for r in rows]  # fmt: skip
        print_json({"config": config, "best_splits": best, "rows": table, "simulated_max_abs_err": err})
        return
    console.print(
        decode_viz.decode_table(rows, best, batch=batch, heads=heads, queries=queries, nk=nk, d=d, dtype=dtype, hw=hw)
    )
    console.print(f"one head simulated with {best} splits: max |O − ref| = {err:.2e} against float64", style="dim")


@bench_app.command("trace")
@click.option("--n", type=POSITIVE, default=4096, show_default=True, help="N = Nk of the traced runs.")
@click.option("--d", type=POSITIVE, default=64, show_default=True)
@click.option("--dtype", type=DTYPE, default="fp16", show_default=True)
@click.option("--hardware", "hardware_name", type=HARDWARE, default=hardware.DEFAULT, show_default=True)
@click.option("--keys", type=POSITIVE, default=50, show_default=True, help="Key presses timed after opening.")
@JSON_REPORT
def bench_trace_command(n, d, dtype, hardware_name, keys, json_path) -> None:
    """Time the trace viewer: record and open an N × N run of each algorithm, then answer key presses."""
    from sim import viewer
    from sim.viz import timing

    rows = viewer.bench_open(n=n, d=d, dtype=dtype, hardware=hardware_name, keys=keys)
    console.print(timing.open_times(rows))
    if json_path:
        bench.write_json({"trace_viewer": rows}, json_path)


app.add_command(grading_commands.assignments)
app.add_command(grading_commands.grade_command)
bench_app.add_command(grading_commands.bench_grade_command)


def main() -> None:
    """Entry point of the `flashsim` console script."""
    app()


if __name__ == "__main__":
    main()
