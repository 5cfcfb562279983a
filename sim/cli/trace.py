"""`flashsim trace`: step through a simulated run in the viewer, print its listing, or save and export it."""

import sys

import click
from click.core import ParameterSource
from rich.console import Console

from sim.api.inputs import configure_shape
from sim.cli import estimate, options, packed, variants
from sim.cli.options import console, print_json
from sim.cli.progress import Work
from sim.cli.run import chip_options, closed_bytes
from sim.core.errors import InputError
from sim.core.format import count
from sim.machine import hardware

TOY_MAX_N, TOY_MAX_D = 64, 16  # `trace` runs on the toy part up to this size unless --hardware says otherwise
RUN_OPTIONS = ("algo", "backward", "n", "nk", "d", "dtype", "causal", "scale", "block_rows", "block_cols", "blocks",
               "sram_bytes", "hardware_name", "seed", "heads", "kv_heads", "pack_gqa", "window", "alibi", "softcap",
               "seqlens")  # fmt: skip
MAX_WIDTH = 1000  # columns to print or export in: wider is a typo, and rich would lay out a screen that wide


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
@options.heads(1)
@variants.run_options
@click.option(
    "--load", "load_path", type=click.Path(dir_okay=False), default=None, help="Open a trace saved with --json."
)
@click.option(
    "--row",
    type=int,
    default=None,
    help="Record query row R's values  [default: every value up to N, Nk, d = 16; row 0's beyond]",
)
@click.option("--step", type=int, default=None, help="Print step K's screen (or export it) and exit.")
@click.option("--play", is_flag=True, help="Animate the run (tile pair by tile pair for big runs).")
@click.option(
    "--delay", type=options.FloatRange(0, 60), default=0.5, show_default=True, help="Seconds per frame of --play."
)
@options.json_output("the trace (versioned; --load FILE reopens it)", name="json_path")
@options.output_file("--svg", "svg_path", "Write --step K's screen, or the listing, as SVG.")
@options.output_file("--html", "html_path", "The same as HTML.")
@click.option(
    "--width",
    type=options.Count(60, MAX_WIDTH),
    default=None,
    help="Columns to print and export in  [default: the terminal's; 120 for exports]",
)
@options.QUIET
@click.pass_context
def trace_command(
    ctx, algo, backward, n, nk, d, dtype, causal, scale, block_rows, block_cols, blocks, sram_bytes, hardware_name,
    seed, heads, kv_heads, pack_gqa, window, alibi, softcap, seqlens, load_path, row, step, play, delay, json_path,
    svg_path, html_path, width, quiet,
) -> None:  # fmt: skip
    """Step through a simulated run: the tiles in SRAM, the paper's line, the running statistics, the bytes moved.

    In a terminal the viewer takes keys (shown on screen); piped, it prints a plain listing.
    """
    from sim.viewer import export, terminal, traces
    from sim.viz import listing, screen, timeline

    if step is not None and play:
        raise InputError("--step, --play: choose one")
    if load_path is not None:
        given = [o for o in RUN_OPTIONS if o in options.typed(ctx)]
        if given:
            option = given[0].removesuffix("_name").replace("_", "-")
            raise InputError(f"--load: the trace file fixes the run; drop --{option}")
        parsed = max(0, estimate.available_memory() - estimate.PROCESS) // estimate.TRACE_FILE_PARSED  # what fits
        trace = traces.load(load_path, row, max_bytes=parsed)
        viewing = estimate.process() + estimate.Estimate(len(trace.steps) * estimate.PER_STEP, 0, 0, len(trace.steps))
        estimate.refuse(viewing, "--load", f"the trace in {load_path!r} ({count(len(trace.steps))} steps)",
                        "a trace of a smaller run")  # fmt: skip
    else:
        n, nk, _ = variants.shape(seqlens, n, nk, 1)
        toy_is_too_small = max(n, nk or n) > TOY_MAX_N or d > TOY_MAX_D  # blocks of a few rows: too many steps to watch
        if ctx.get_parameter_source("hardware_name") is ParameterSource.DEFAULT and toy_is_too_small:
            hardware_name = hardware.DEFAULT
        chip = chip_options(causal, scale, block_rows, block_cols, blocks, sram_bytes, hardware_name)
        config = _refuse_too_much(ctx, algo, backward, n, nk, d, dtype, chip, heads, seqlens)
        variant = dict(kv_heads=kv_heads, pack_gqa=pack_gqa, window=window, alibi=alibi, softcap=softcap)
        with Work(quiet) as work:
            with work.simulating(f"recording {algo}" + " backward" * backward, closed_bytes(config, backward)):
                trace = variants.trace(algo, backward, n, nk or n, d, heads, dtype, seed, row, chip, **variant,
                                       seqlens=seqlens)  # fmt: skip
    view = timeline.Timeline(trace)
    traces.check_step(view, step)
    if json_path:
        save(trace, json_path, len(view))
    if json_path == "-":
        return
    for path, kind in ((svg_path, "svg"), (html_path, "html")):
        if path:
            shown = listing.listing(view) if step is None else screen.screen(view, step)
            export.write(shown, path, kind, width or 120, f"flashsim trace {screen.run_title(view)}")
            console.print(f"wrote {path}: " + ("the listing" if step is None else f"step {step}"), markup=False)
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


def _refuse_too_much(ctx, algo, backward, n, nk, d, dtype, chip, heads: int = 1, seqlens=None) -> dict:
    """The run's configuration, once its recording (of `heads` heads, the first traced; with `seqlens` every
    sequence run, the first recorded) is known to fit a trace, the memory and the time limit."""

    batch = len(seqlens) if seqlens else 1

    def configure(n, nk, d):
        return configure_shape(algo, backward, batch * heads, n, nk or n, d, dtype, chip["scale"], chip["causal"],
                               chip["block_rows"], chip["block_cols"], chip["blocks"], chip["sram_bytes"],
                               chip["hardware"])  # fmt: skip

    def cost(n, nk, d) -> estimate.Estimate:
        config = configure(n, nk, d)

        def one(m, mk, times) -> estimate.Estimate:  # O, L for the backward: the reference's pace
            reference = estimate.check(m, mk, d, times * heads) if backward else estimate.Estimate()
            return estimate.listing(config | dict(n=m, nk=mk, heads=times * heads), backward=backward) + reference

        first = seqlens[0] if seqlens else None  # a packed batch records its first sequence
        steps = estimate.trace_steps(first or n, first or nk or n, config["block_rows"], config["block_cols"])
        recording = estimate.Estimate(steps * estimate.PER_STEP, steps * estimate.STEP_BYTES, 0, steps)
        run = packed.price(one, packed.sequences(seqlens, n, nk or n, 1))
        return estimate.process() + run + recording + packed.drawn(seqlens, heads, d)

    config = configure(n, nk, d)
    small = config["block_rows"] * config["block_cols"] < estimate.SMALL_TILE
    what = f"recording {algo}{' backward' * backward} at {packed.describe(config, seqlens, heads)}"
    hints = ["bigger blocks: a larger --hardware or --sram-bytes"] if small else []
    hints += ["fewer or shorter sequences in --seqlens"] if seqlens else []
    estimate.guard(ctx, cost, what, hints, small, n=n, nk=nk, d=d)
    return config


def save(trace, json_path: str, steps: int) -> None:
    """--json: the trace as one JSON object on stdout ("-"), or written to the file with a line saying so."""
    if json_path == "-":
        print_json(trace.to_dict())
    else:
        trace.save(json_path)
        console.print(f"wrote {json_path}: the trace, {steps} steps (flashsim trace --load {json_path} opens it)",
                      markup=False)  # fmt: skip


COMMANDS = (trace_command,)
