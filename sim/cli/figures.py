"""`flashsim paper fig2`, `sweep` and `decode`: the paper's Figure 2, the roofline sweep, Flash-Decoding."""

import os
import sys
from itertools import product
from math import ceil

import click
import numpy as np

import sim
from sim.algorithms import registry
from sim.api import reference, reference_variants, tolerance
from sim.api.inputs import configure_shape, random_inputs
from sim.cli import estimate, options, variants
from sim.cli.options import console, emit_json
from sim.cli.progress import Work
from sim.core import atomic_file
from sim.core.dtypes import DTYPES, itemsize
from sim.core.errors import InputError
from sim.core.format import abs_error, bytes_and_units, count, decimal_bytes, plural
from sim.lab import paper, sweep
from sim.machine import blocks as blocks_
from sim.machine import hardware, occupancy
from sim.viz import decode as decode_viz
from sim.viz import paper as paper_viz
from sim.viz import sweep as sweep_viz

INTS = variants.Ints("N[,N…]", "integers separated by commas, such as 512,1024,2048")
PLOT_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg", "eps", "ps", "tif", "tiff", "webp")  # what matplotlib writes


@click.group("paper")
def paper_group() -> None:
    """The FlashAttention paper's figures, reproduced by counting."""


@paper_group.command("fig2")
@options.hardware("A100-40GB", "GPU of the time estimate.")  # the paper's GPU, not the simulator's default
@options.json_output("the figure's numbers")
@options.QUIET
@click.pass_context
def paper_fig2_command(ctx, hardware_name, as_json, quiet) -> None:
    """Figure 2: GPT-2 medium attention, forward + backward, standard vs FlashAttention, beside the paper's numbers."""

    def cost() -> estimate.Estimate:  # one head of each algorithm simulated, forward and backward
        est = estimate.process()
        for algorithm, backward in product(("standard", "flash1"), (False, True)):
            config = configure_shape(algorithm, backward, 1, paper.N, paper.N, paper.D, paper.DTYPE, None, False,
                                     None, None, "fit", None, hardware_name)  # fmt: skip
            est += estimate.listing(config, backward=backward)
        return est + estimate.check(paper.N, paper.N, paper.D)

    estimate.guard(ctx, cost, f"Figure 2 on the {hardware_name}", ["another --hardware"])
    with Work(quiet) as work, work.running("simulating one head of each, forward and backward"):
        fig = paper.figure2(hardware_name)
    if not emit_json(fig.to_dict(), as_json):
        console.print(paper_viz.figure2(fig))


@click.command("sweep")
@click.option(
    "--n",
    "ns",
    type=INTS,
    default="512,1024,2048,4096,8192,16384,32768,65536",
    show_default=True,
    help="Sequence lengths N = Nk.",
)  # lists, unlike the shared --n, --d and --sram-bytes of one run
@click.option("--d", "ds", type=INTS, default="64", show_default=True, help="Head dimensions.")
@click.option(
    "--block",
    "block_sizes",
    type=INTS,
    default=None,
    help="FlashAttention blocks Br = Bc  [default: the largest that fit]",
)
@click.option("--sram-bytes", "srams", type=INTS, default=None, help="SRAM sizes  [default: the hardware's]")
@options.batch(16)
@options.heads(16)
@options.dtype("fp16")
@options.hardware()
@options.causal("Causal mask (FlashAttention-2 skips the hidden blocks).")
@options.algo(sweep.flash_variants(), "FlashAttention variant.")
@options.backward("Forward + backward  [default: the forward pass]")
@options.json_output("the sweep")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV instead of the table.")
@options.output_file("--plot", "plot_path", "Also write a figure (needs matplotlib).")
@options.QUIET
def sweep_command(
    ns, ds, block_sizes, srams, batch, heads, dtype, hardware_name, causal, algo, backward, as_json, as_csv, plot_path,
    quiet,
) -> None:  # fmt: skip
    """Standard attention vs FlashAttention as N grows: bytes, FLOPs, intensity, roofline time, and where S and P run out of memory."""
    if as_json and as_csv:
        raise InputError("--json, --csv: choose one of them")
    if plot_path and os.path.splitext(plot_path)[1].lower().lstrip(".") not in PLOT_FORMATS:
        raise InputError(f"--plot: {plot_path!r} names no image format; end it in .{', .'.join(PLOT_FORMATS)}")
    configurations = len(ns) * len(ds) * len(block_sizes or (None,)) * len(srams or (None,))
    estimate.guard(
        click.get_current_context(),
        lambda: _sweep_cost(ns, ds, block_sizes, srams, dtype, hardware_name, algo, backward, batch * heads),
        f"a sweep of {count(configurations)} configuration{'s' * (configurations > 1)}",
        ["fewer or smaller N, or larger --block"],
    )  # fmt: skip
    with Work(quiet) as work, work.running(f"sweeping {count(configurations)} configurations"):
        sw = sweep.sweep(
            ns, ds=ds, blocks=block_sizes or (None,), srams=srams or (None,), batch=batch, heads=heads, dtype=dtype,
            hardware=hardware_name, causal=causal, algorithm=algo, backward=backward,
        )  # fmt: skip
    if plot_path:
        with atomic_file.target(plot_path) as where:
            sweep_viz.plot(sw, where, fmt=os.path.splitext(plot_path)[1].lower().lstrip("."))
    if as_csv:
        sys.stdout.write(sw.to_csv())
    elif not emit_json(sw.to_dict(), as_json):
        console.print(sweep_viz.table(sw))


def _sweep_cost(ns, ds, block_sizes, srams, dtype, hardware_name, algo, backward, heads) -> estimate.Estimate:
    """The closed forms a sweep evaluates (one row block sum per configuration and pass) and sim.machine's
    prediction below HBM where it plays the L2 (`sweep.predicted_steps`)."""
    s, hw = itemsize(dtype), hardware.get(hardware_name)
    configurations, row_blocks, steps = 0, 0, [0, 0]  # block-steps played: the forward's, the backward's
    for d, block, sram in product(ds, block_sizes or (None,), srams or (None,)):
        try:  # the blocks at the longest N are the smallest the sweep meets
            Br = block or registry.fit(algo, max(ns), max(ns), d, s, sram or hw.sram_bytes)[0]
            blocks = [sweep.pass_blocks(algo, N, d, s, sram or hw.sram_bytes, block, backward) for N in ns]
        except InputError:  # the sweep says so itself, naming d and N, before any closed form
            continue
        configurations += len(ns)
        row_blocks += (1 + backward) * sum(ceil(N / min(Br, N)) for N in ns)
        for N, (fwd, bwd) in zip(ns, blocks, strict=True):
            steps = [a + b for a, b in zip(steps, sweep.predicted_steps(N, fwd, bwd, heads, hw, algo), strict=True)]
    return estimate.sweeping(configurations, row_blocks, *steps)


@click.command("decode")
@options.nk(32768, "Keys in the K/V cache.")  # a long cache by default, not N
@click.option("--queries", type=options.POSITIVE, default=1, show_default=True, help="Query rows (new tokens).")
@options.d(128)
@options.batch(1)
@options.heads(16)
@options.dtype("fp16")
@options.hardware()
@click.option(
    "--splits", type=INTS, default=None, help="Numbers of splits to compare  [default: 1, 2, 4, … and the best]"
)
@variants.PAGE_SIZE
@options.json_output("the table")
@options.QUIET
@click.pass_context
def decode_command(ctx, nk, queries, d, batch, heads, dtype, hardware_name, splits, page_size, as_json, quiet) -> int:
    """Flash-Decoding: how many SMs one thread block per (batch, head) keeps busy, and splitting the K/V cache.

    One head is simulated and held to float64 within its bound (`sim.api.tolerance.decoding`): exit code 1 outside.
    """
    hw, s = hardware.get(hardware_name), itemsize(dtype)
    if splits and max(splits) > nk:
        raise InputError(f"--splits: {max(splits)} chunks of the {nk} keys would leave some empty; choose 1 … {nk}")
    if page_size is not None and page_size > nk:
        raise InputError(f"--page-size: a page of {page_size} keys is larger than the cache's {nk}; choose 1 … {nk}")

    best = occupancy.best_splits(batch, heads, queries, nk, d, s, hw)  # the model alone: 128² terms at most
    _refuse_queries(queries, d, s, hw)

    def cost(nk, queries, d) -> estimate.Estimate:
        P = min(best, nk)
        Bc = blocks_.decoding_fit(queries, nk, d, s, hw.sram_bytes, P)  # as sim.decode will choose it
        model = estimate.sweeping(len(splits or ()), sum(splits or ()))  # the occupancy of each number of splits
        est = estimate.process() + model + estimate.decoding(queries, nk, d, dtype, Bc, P)
        if page_size is None:
            return est
        pages = -(-nk // page_size)  # the paged pass: a tile a page
        return est + estimate.decoding(queries, nk, d, dtype, min(page_size, nk), min(P, pages))

    what = f"Flash-Decoding of {count(queries)} query row{'s' * (queries > 1)} against Nk = {count(nk)} keys, d = {d}"
    estimate.guard(ctx, cost, what, [], nk=nk, queries=queries, d=d)
    choices = splits or sorted({1, best, *(2**i for i in range(1, 8) if 2**i <= min(nk, 2 * best))})
    rows = [occupancy.occupancy(batch, heads, P, queries, nk, d, s, hw) for P in choices]
    fit = occupancy.most_splits(queries, d, s, hw, max(choices))  # rows past it: the combine's buffers do not fit
    with Work(quiet) as work:
        q, k, v = random_inputs(1, 1, queries, nk, d, dtype, 0)
        moved = occupancy.occupancy(1, 1, best, queries, nk, d, s, hw).hbm_bytes  # one head, in `best` splits
        with work.simulating("Flash-Decoding, one head", moved):
            one = sim.decode(q, k, v, splits=best, hardware=hw)  # one head through the simulator, against float64
        ref = reference.attention(q, k, v)[0]
        err = float(np.max(np.abs(one.output.astype(np.float64) - ref)))
        bound = tolerance.decoding(one, q, k, v, ref).bound  # no verdict was given: a wrong decode exited 0 (95)
        paged = None
        if page_size is not None:
            table = 4 * -(-nk // page_size)  # int32 block-table entries, each read once
            with work.simulating(f"the same head on pages of {plural(page_size, 'key')}", moved + table):
                paged = _paged(queries, nk, d, dtype, hw, best, page_size)
    if as_json:
        config = dict(nk=nk, queries=queries, d=d, batch=batch, heads=heads, dtype=dtype, hardware=hw.name)
        table = [dict(splits=r.splits, blocks=r.blocks, busy_sms=r.busy, waves=r.waves, utilization=r.utilization,
                      hbm_bytes=r.hbm_bytes, seconds=r.seconds, fits_sram=r.splits <= fit) for r in rows]  # fmt: skip
        said = {"config": config, "best_splits": best, "rows": table, "simulated_max_abs_err": err,
                "tolerance": {"bound": bound, "within": bool(err <= bound)}, "paged": paged}  # fmt: skip
        if emit_json(said, as_json):
            return _wrong(err, bound, paged)
    console.print(
        decode_viz.decode_table(
            rows, best, fit=fit, batch=batch, heads=heads, queries=queries, nk=nk, d=d, dtype=dtype, hw=hw
        )
    )
    simulated = f"one head simulated in {plural(best, 'split')}"
    console.print(f"{simulated}: max |O − ref| = {abs_error(err, 2)} against float64, {_verdict(err, bound)}",
                  style="dim", markup=False)  # fmt: skip
    if paged:
        console.print(_paged_line(paged), style="dim", markup=False)
    return _wrong(err, bound, paged)


def _wrong(err: float, bound: float, paged: dict | None) -> int:
    """Exit code 1 where the simulated head, or its paged run, is outside its bound (a NaN is)."""
    return int(not err <= bound or (paged is not None and not paged["within"]))


def _refuse_queries(queries: int, d: int, s: int, hw) -> None:
    """Refuse --queries whose Flash-Decoding buffers do not fit even one key at a time in one split (the least SRAM:
    the model takes fewer splits before it refuses), naming the most rows that fit (found by halving the gap)."""

    def need(q: int) -> int:
        return sum(blocks_.decoding_footprint(q, 1, d, s, 1).values())

    if need(queries) <= hw.sram_bytes or need(1) > hw.sram_bytes:  # (not even one: sim.decode says so, naming --d)
        return
    fit = blocks_.fewer(queries, lambda q: need(q) <= hw.sram_bytes)
    raise InputError(
        f"--queries: {count(queries)} query rows need {bytes_and_units(need(queries))} of SRAM for Flash-Decoding, "
        f"even one key at a time in one split, but the {hw.name}'s SRAM holds {bytes_and_units(hw.sram_bytes)}: "
        f"--queries {fit} fits"
    )


def _paged(queries: int, nk: int, d: int, dtype: str, hw, splits: int, page_size: int, seed: int = 0) -> dict:
    """One head decoded on a paged cache of `page_size`-key pages (scattered at random), against float64: its page
    and block-table reads, and what a contiguous cache of the same keys reads."""
    rng = np.random.default_rng(seed)
    pages = -(-nk // page_size)
    q = rng.standard_normal((1, 1, queries, d)).astype(DTYPES[dtype])
    k_cache, v_cache = (rng.standard_normal((pages, page_size, 1, d)).astype(q.dtype) for _ in range(2))
    table = rng.permutation(pages)[None]
    r = sim.decode(q, k_cache, v_cache, block_table=table, cache_seqlens=[nk], splits=min(splits, pages), hardware=hw)
    ref, _ = reference_variants.paged(q, k_cache, v_cache, table, [nk])
    per_tensor = r.ledger.per_tensor()
    err, bound = (
        float(np.max(np.abs(r.output.astype(np.float64) - ref))),
        tolerance.decoding(r, q, k_cache, v_cache, ref),
    )
    return dict(page_size=page_size, pages=pages, splits=r.splits, hbm_bytes=r.hbm_bytes,
                kv_read_bytes=per_tensor["K_cache"]["read"] + per_tensor["V_cache"]["read"],
                block_table_read_bytes=per_tensor["block_table"]["read"], max_abs_err=err, bound=bound.bound,
                within=bool(err <= bound.bound))  # fmt: skip


def _paged_line(p: dict) -> str:
    """`_paged`'s result in one line."""
    return (f"paged cache, pages of {plural(p['page_size'], 'key')} ({plural(p['pages'], 'page')}, "
            f"{plural(p['splits'], 'split')}, one head): "
            f"K/V {decimal_bytes(p['kv_read_bytes'])} read, block table {count(p['block_table_read_bytes'])} B, "
            f"max |O − float64| = {p['max_abs_err']:.3g}, {_verdict(p['max_abs_err'], p['bound'])}")  # fmt: skip


def _verdict(err: float, bound: float) -> str:
    """A decode's verdict against its bound (`sim.api.tolerance.decoding`)."""
    return f"{'✓ within' if err <= bound else '✗ outside'} its bound (≤ {abs_error(bound)}, sim.api.tolerance.decoding)"


COMMANDS = (paper_group, sweep_command, decode_command)
