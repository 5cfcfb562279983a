"""`flashsim run` and `compare`: one simulated run, reported with a verdict, or set beside a GPU kernel."""

import click
import numpy as np
from rich.console import Console

import sim
from sim.algorithms import registry
from sim.api import closed_form, gradient_tolerance
from sim.api.inputs import configure_shape, random_inputs
from sim.cli import estimate, options, packed, variants
from sim.cli.options import console, emit_json
from sim.cli.progress import Work
from sim.core.dtypes import DTYPES
from sim.core.errors import InputError
from sim.core.format import count
from sim.lab import report, training
from sim.machine import mask
from sim.viz import backward as backward_viz
from sim.viz import run as run_viz


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
@click.option(
    "--counts-only",
    is_flag=True,
    help="Count bytes and FLOPs from the closed form alone (any N, at once; no error check).",
)
@options.backward("Also run the backward pass (upstream gradient dO seeded at random).")
@variants.run_options
@options.json_output()
@options.QUIET
@click.pass_context
def run_command(
    ctx, algo, n, nk, d, batch, heads, dtype, causal, scale, block_rows, block_cols, blocks, sram_bytes, hardware_name,
    seed, counts_only, backward, as_json, quiet, **variant,
) -> int:  # fmt: skip
    """Simulate one attention forward pass on seeded random inputs and report its traffic, its error and a verdict.

    Exit code 1 when the output is outside the tolerance stated for its dtype (`sim.api.tolerance`), or with
    --backward a gradient outside its own (`sim.api.gradient_tolerance`).
    """
    if blocks == "paper" and (block_rows or block_cols):
        raise InputError("--blocks paper: cannot be combined with --block-rows/--block-cols")
    chip = chip_options(causal, scale, block_rows, block_cols, blocks, sram_bytes, hardware_name)
    n, nk, batch = variants.shape(variant["seqlens"], n, nk, batch)
    shape = dict(n=n, nk=nk or n, d=d, batch=batch, heads=heads, dtype=dtype)

    def cost(n, nk, d, batch, heads) -> estimate.Estimate:
        nk, seqlens = nk or n, variant["seqlens"]
        forward = configure_shape(algo, False, batch * heads, n, nk, d, dtype, scale, causal, block_rows, block_cols,
                                  blocks, sram_bytes, hardware_name)  # fmt: skip
        slopes = estimate.Estimate(heads * variants.PER_SLOPE, heads * variants.SLOPE_BYTES)  # --alibi's, built first
        slopes = slopes if variant["alibi"] else estimate.Estimate()
        closed = estimate.counting(variants.row_blocks(algo, n, heads, forward["block_rows"], **variant))
        if counts_only:
            return slopes + closed
        back = configure_shape(algo, True, batch * heads, n, nk, d, dtype, scale, causal, block_rows, block_cols,
                               blocks, sram_bytes, hardware_name) if backward else None  # fmt: skip

        def one(m, mk, times) -> estimate.Estimate:  # `times` sequences of m × mk, the blocks chosen for the longest
            share = mask.window_share(m, mk, forward["block_rows"], forward["block_cols"], causal, variant["window"])
            est = estimate.listing(forward | dict(n=m, nk=mk, heads=times * heads)).times(share)
            scores = (variant["alibi"] + (variant["softcap"] is not None)) * variants.PER_SCORE_VARIANT * m * mk
            est += estimate.Estimate(scores * times * heads * (variants.BACKWARD_VARIANT if backward else 1))
            at_once = 1 if seqlens else times  # the float64 reference of a packed batch: a sequence at a time
            est += estimate.check(m, mk, d, at_once * heads).times(times // at_once)
            if backward:
                est += estimate.listing(back | dict(n=m, nk=mk, heads=times * heads), backward=True).times(share)
                est += estimate.check(m, mk, d, at_once * heads, backward=True).times(times // at_once)
            return est

        run = packed.price(one, packed.sequences(seqlens, n, nk, batch))
        return slopes + closed + estimate.process() + run + packed.drawn(seqlens, heads, d)

    forward = configure_shape(algo, False, batch * heads, n, nk or n, d, dtype, scale, causal, block_rows, block_cols,
                              blocks, sram_bytes, hardware_name)  # fmt: skip
    Br, Bc = forward["block_rows"], forward["block_cols"]
    small = Br * Bc < estimate.SMALL_TILE
    walked = variants.row_blocks(algo, n, heads, Br, **variant)
    counted = estimate.within(estimate.counting(walked))  # whether --counts-only would be let through
    hints = ([] if counts_only or not counted else ["--counts-only (the closed form, at once)"]) + (
        ["bigger blocks: a larger --hardware or --sram-bytes"] if small else []
    )
    hints += ["fewer or shorter sequences in --seqlens"] if variant["seqlens"] and not counts_only else []
    shown = estimate.shape_of(forward) if counts_only else packed.describe(forward, variant["seqlens"], heads)
    what = f"{algo} at {shown}"
    if counts_only and walked > 1000:  # a closed form that walks its rows: say so, and how to shorten it
        what += f", its closed forms taking {count(walked)} steps over row blocks of {Br} (a mask, GQA's packed rows)"
        g = max(1, heads // (variant["kv_heads"] or heads))
        hints = [f"fewer query heads per K/V head (g = {count(g)} here: --heads / --kv-heads)"] if g > 1 else []
        hints += [f"a larger --block-rows (Br = {count(Br)} here)"] if "block_rows" in options.typed(ctx) else []
    estimate.guard(ctx, cost, what, hints, small, n=n, nk=nk, d=d, batch=batch, heads=heads)
    with np.errstate(over="ignore", invalid="ignore"):  # S past fp16's range is inf, then NaN: the verdict says so
        return simulate(algo, n, nk, d, batch, heads, dtype, chip, seed, counts_only, backward, as_json, quiet, forward,
                        shape, scale, causal, block_rows, block_cols, blocks, sram_bytes, hardware_name, **variant)  # fmt: skip


def simulate(
    algo, n, nk, d, batch, heads, dtype, chip, seed, counts_only, backward, as_json, quiet, forward, shape, scale,
    causal, block_rows, block_cols, blocks, sram_bytes, hardware_name, **variant,
) -> int:  # fmt: skip
    """The run `run_command` let through: the forward (and backward), their checks and the report; the exit code."""
    if variants.given(**variant):
        return variants.report(
            algo, n, nk, d, batch, heads, dtype, chip, seed, counts_only, backward, as_json, quiet=quiet, **variant
        )
    with Work(quiet) as work:
        if counts_only:
            result, check = closed_form.forward(algo, **shape, **chip), None
        else:
            q, k, v = random_inputs(batch, heads, n, nk or n, d, dtype, seed)
            with work.simulating(f"{algo} forward", closed_bytes(forward)):
                result = sim.run(algo, q, k, v, **chip)
            with work.steps("float64 reference", n) as advance:
                check = report.output_check(result, q, k, v, advance)
        summary = report.run_report(result, batch=batch, heads=heads, check=check)
        if backward:
            if counts_only:
                grads, grad_check = closed_form.backward(algo, **shape, **chip), None
            else:
                back = configure_shape(algo, True, batch * heads, n, nk or n, d, dtype, scale, causal, block_rows,
                                       block_cols, blocks, sram_bytes, hardware_name)  # fmt: skip
                forward_bound = summary["tolerance"]["bound"] if summary["tolerance"] else None
                grads, grad_check = run_backward(work, result, seed, back, forward_bound)
            summary["backward"] = training.backward_report(grads, grad_check and grad_check["max_abs_err"])
            summary["backward"]["tolerance"] = grad_check and grad_check["tolerance"]
            summary["backward"] |= {
                key: grad_check[key] for key in gradient_tolerance.NOTES if grad_check and key in grad_check
            }
            summary["forward_backward"] = training.split(result, grads)
        summary["machine"] = report.below_hbm(result)
    if not emit_json(summary, as_json, indent=None):
        console.print(run_viz.run_table(summary))
        if backward:
            console.print(backward_viz.backward_table(summary))
    return 1 if outside(summary["tolerance"]) or outside(summary.get("backward", {}).get("tolerance")) else 0


def outside(tolerance: dict | None) -> bool:
    """Whether a verdict was given and is ✗ (`within` None: no bound, no verdict)."""
    return bool(tolerance) and tolerance["within"] is False


def closed_bytes(config: dict, backward: bool = False) -> int:
    """The HBM bytes a pass of `config` (`sim.api.inputs.configure_shape`'s) moves, every head, by the closed form."""
    s = DTYPES[config["dtype"]].itemsize
    counts = registry.backward_counts if backward else registry.counts
    c = counts(config["algorithm"], config["n"], config["nk"], config["d"], s, config["block_rows"],
               config["block_cols"], config["causal"])  # fmt: skip
    return c.hbm_bytes * config["heads"]


def run_backward(work, result, seed: int, config: dict, forward_bound: float | None):
    """The backward pass of a `run` with the blocks `config` chose, on a seeded random dO (from what the forward
    kept, `sim.backward(result, do)`), and its errors against the float64 reference with their verdict
    (`sim.api.gradient_tolerance.check`, given the forward's bound)."""
    do = np.random.default_rng(seed + 1).standard_normal(result.q.shape).astype(result.q.dtype)
    with work.simulating(f"{result.algorithm} backward", closed_bytes(config, backward=True)):
        grads = sim.backward(result, do, block_rows=config["block_rows"], block_cols=config["block_cols"])
    with work.steps("float64 gradients", 1):
        check = gradient_tolerance.check(grads, result.q, result.k, result.v, do, forward_bound=forward_bound,
                                         forward_block_cols=result.block_cols)  # fmt: skip
    return grads, check


@click.command("compare")
@options.n(2048)
@options.nk()
@options.d(64, type=options.Count(1, 128))  # the kernels' d ≤ 128
@options.batch(1)
@options.heads(16)
@options.dtype("fp16", choices=("fp16", "bf16"))  # the kernels' dtypes
@options.causal()
@options.backward("Compare the backward pass (rung 4, 5 or 7).")
@options.kernel(
    (*options.FORWARD_RUNGS, *options.BACKWARD_RUNGS),
    "GPU kernel by rung: forward 1, 2, 3 or 6, backward 4, 5 or 7  [default: the public call's choice for d here]",
)
@click.option("--no-counters", is_flag=True, help="Do not run Nsight Compute (time only).")
@click.option(
    "--variants", is_flag=True,
    help="Each variant's closed-form bytes against ncu at N = 4096, forward or (--backward) backward "
    "(gpu/lab/compare_variants.py; takes --d).",
)  # fmt: skip
@options.JSON_REPORT
@options.QUIET
@click.pass_context
def compare_command(
    ctx, n, nk, d, batch, heads, dtype, causal, kernel, backward, no_counters, variants, json_path, quiet
) -> None:
    """Run the simulator with a GPU kernel's own tiling and the kernel on the same inputs: errors, bytes, time."""
    if variants:  # its own cases at N = 4096, a line each as Nsight Compute measures it (stderr with --json -)
        why = "its cases are its own, at N = 4096; it takes --d, --backward and --json"
        options.only_with(ctx, "--variants", ("variants", "d", "backward", "json_path", "quiet"), why)
        from gpu.lab import compare_variants

        out = Console(stderr=True) if json_path == "-" else console
        report = compare_variants.run_compare(
            (d,), direction="backward" if backward else "forward",
            progress=lambda line: out.print(line, highlight=False), command=options.command_line(),
        )  # fmt: skip
        emit_json(report, json_path, indent=1)
        return
    kernel = None if kernel is None else int(kernel)
    from gpu import backward as gpu_backward
    from gpu import flash
    from gpu.lab import compare as gpu_compare
    from gpu.lab import compare_backward as gpu_compare_backward
    from gpu.lab import render_compare

    tiles = (gpu_backward.resolve(kernel, d) if backward else flash.resolve(kernel, d)).default_tiles(d)
    simulated = 1 if backward else batch * heads  # the backward simulates head 0's numerics, counts the rest

    def cost(n, nk, d, batch, heads) -> estimate.Estimate:  # the simulator's side, on this machine
        run = estimate.simulate("flash2", n=n, nk=nk or n, d=d, dtype=dtype, Br=tiles.block_rows,
                                Bc=tiles.block_cols, causal=causal, heads=simulated, backward=backward)  # fmt: skip
        return estimate.process() + run + estimate.check(n, nk or n, d, simulated, backward)

    what = f"simulating flash2 at N = {count(n)}, Nk = {count(nk or n)}, d = {d}, {count(simulated)} heads with the kernel's tiling"
    estimate.guard(ctx, cost, what, [], n=n, nk=nk, d=d, batch=batch, heads=heads)
    config = dict(algorithm="flash2", n=n, nk=nk or n, d=d, dtype=dtype, block_rows=tiles.block_rows,
                  block_cols=tiles.block_cols, causal=causal, heads=simulated)  # fmt: skip
    module = gpu_compare_backward if backward else gpu_compare
    with Work(quiet) as work, work.simulating("the simulator, then the kernel", closed_bytes(config, backward)):
        result = (module.compare_backward if backward else module.compare)(
            n=n, nk=nk or n, d=d, batch=batch, heads=heads, dtype=dtype, causal=causal, kernel=kernel,
            profile=not no_counters,
        )  # fmt: skip
    if not emit_json(module.report(result, options.command_line()), json_path, indent=1):
        console.print((render_compare.backward_comparison if backward else render_compare.comparison)(result))


@click.command("compare-decode")
@options.batch(4)
@options.heads(32)
@click.option(
    "--kv-heads", type=options.POSITIVE, default=4, show_default=True, help="K/V heads (GQA: heads = g · kv-heads)."
)
@click.option("--nq", type=options.Count(1, 8), default=1, show_default=True, help="Query rows per sequence.")
@options.nk(8192, help="Keys per sequence (paged: the longest; the others ragged, down to half).")
@click.option("--d", type=click.Choice(["64", "128"]), default="128", show_default=True, help="Head dimension d.")
@options.dtype("fp16", choices=("fp16", "bf16"))
@click.option(
    "--page-size",
    type=options.POSITIVE,
    default=None,
    help="A paged cache of pages this size, shuffled  [default: contiguous]",
)
@options.causal()
@click.option("--no-counters", is_flag=True, help="Do not run Nsight Compute.")
@options.JSON_REPORT
def compare_decode_command(batch, heads, kv_heads, nq, nk, d, dtype, page_size, causal, no_counters, json_path) -> None:
    """sim.decode beside rung 8 (gpu.decode) on the same inputs: outputs, and predicted bytes against ncu's at L2."""
    from gpu.dtypes import ALIASES
    from gpu.lab import compare_decode

    report = compare_decode.compare_decode(
        batch=batch, heads=heads, kv_heads=kv_heads, nq=nq, nk=nk, d=int(d), dtype=ALIASES[dtype],
        page_size=page_size, causal=causal, profile=not no_counters, command=options.command_line(),
    )  # fmt: skip
    if not emit_json(report, json_path, indent=1):
        console.print(compare_decode.summary(report))


COMMANDS = (run_command, compare_command, compare_decode_command)
