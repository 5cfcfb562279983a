"""`flashsim ring`: one attention split over P simulated devices — ring attention or Ulysses — bytes and time."""

import sys

import click

from sim.api import gradient_tolerance, ring_check
from sim.api.inputs import random_inputs
from sim.api.ring_api import DEFAULT_HARDWARE, SCHEMES, count_ring, ring
from sim.cli import estimate, options
from sim.cli.options import console, emit_json
from sim.cli.progress import Work
from sim.core.dtypes import DTYPES
from sim.core.errors import InputError
from sim.core.format import abs_error, count
from sim.machine import ring_model
from sim.machine.devices import DEFAULT_LINK, LINKS
from sim.machine.sharding import SHARDINGS

RING_PAIR_SECONDS = 12e-6  # one (step, device) pair of the closed forms, counted and timed: 600 devices in 5 s


@click.command("ring")
@click.option("--devices", type=options.POSITIVE, default=4, show_default=True, help="P: devices sharing the sequence.")
@click.option("--scheme", type=click.Choice(SCHEMES), default="ring", show_default=True,
              help="ring: K/V shards go round; ulysses: all-to-all to whole heads.")  # fmt: skip
@click.option("--sharding", type=click.Choice(SHARDINGS), default="contiguous", show_default=True,
              help="The ring's rows per device: contiguous, or zigzag (balanced under a causal mask).")  # fmt: skip
@options.n(1024, "Sequence length N (every device's shard together).")
@options.d(64)
@options.batch(1)
@options.heads(8)
@options.dtype("fp16")
@options.causal("Causal mask.")
@click.option("--link", "link_name", type=click.Choice(list(LINKS), case_sensitive=False), default=DEFAULT_LINK,
              show_default=True, help="What connects the devices (sim.machine.devices).")  # fmt: skip
@options.hardware(DEFAULT_HARDWARE, "Every device's GPU preset.")
@options.SRAM_BYTES
@options.SEED
@click.option("--counts-only", is_flag=True, help="Bytes and time from the closed forms alone (any N, at once).")
@options.backward("Also run the backward pass (dK, dV ride the ring; upstream gradient seeded at random).")
@click.option("--trace", "view", is_flag=True, help="Step through one device's forward in the trace viewer.")
@click.option("--device", type=click.IntRange(0), default=0, show_default=True, help="The device --trace follows.")
@click.option("--step", type=click.IntRange(0), default=None, help="With --trace: print step K's screen and exit.")
@options.json_output("the report (with --trace, the trace: flashsim trace --load FILE reopens it)")
@options.QUIET
@click.pass_context
def ring_command(
    ctx, devices, scheme, sharding, n, d, batch, heads, dtype, causal, link_name, hardware_name, sram_bytes, seed,
    counts_only, backward, view, device, step, as_json, quiet,
) -> int:  # fmt: skip
    """Split one attention over P devices and report each device's HBM bytes, each link's, and the time per step.

    A step takes max(compute, transfer): the next shard travels while this one is attended to. Exit code 1 when
    the output is outside the ring's tolerance against float64 attention (`sim.api.tolerance`).
    """
    if counts_only and (view or step is not None):
        raise InputError("--counts-only: nothing is simulated, so there is no trace; drop --trace or --counts-only")
    if step is not None and not view:
        raise InputError("--step: shows a step of --trace; add --trace")
    if "device" in options.typed(ctx) and not view:  # (it was ignored, 0 too: red teams 90, 93)
        raise InputError("--device: chooses the device --trace follows; add --trace")
    if view and scheme == "ulysses":
        raise InputError("--trace: follows a device round the ring; Ulysses' all-to-alls have no ring to step through")
    if device >= devices:
        raise InputError(f"--device: {device} is not one of the {devices} devices (0 … {devices - 1})")
    plan = dict(
        n=n,
        d=d,
        devices=devices,
        heads=heads,
        batch=batch,
        dtype=dtype,
        scheme=scheme,
        sharding=sharding,
        causal=causal,
        backward=backward,
        link_name=link_name,
        hardware=hardware_name,
        sram_bytes=sram_bytes,
    )
    estimate.guard(ctx, _counting, f"counting a ring of {devices} devices ({count(devices * devices)} device steps)",
                   [], option="--devices", devices=devices, backward=backward, zigzag=sharding == "zigzag")  # fmt: skip
    with Work(quiet) as work, work.steps(f"counting {devices} devices' ring steps", 1):
        counted = count_ring(**plan)
    if counts_only:
        return _report(counted, None, as_json)
    _refuse_too_much(ctx, counted, view, n=n, d=d, batch=batch, heads=heads)
    with Work(quiet) as work:
        arrays = random_inputs(batch, heads, n, n, d, dtype, seed, grad=backward)
        with work.steps(f"simulating {devices} devices", 1):
            result = ring(*arrays[:3], devices=devices, scheme=scheme, sharding=sharding, causal=causal,
                          do=arrays[3] if backward else None, link_name=link_name, hardware=hardware_name,
                          sram_bytes=sram_bytes, record="steps" if view else "counts", traced=device)  # fmt: skip
        with work.steps("float64 reference", 1 + backward) as advance:
            check = ring_check.output(result, *arrays[:3])
            advance()
            grads = ring_check.gradients(result, *arrays, check["bound"]) if backward else None
    if view:
        return _view(result.trace, step, as_json)
    return _report(result, check, as_json, grads)


def _report(result, check: dict | None, as_json: str | None, grads: dict | None = None) -> int:
    from sim.viz import ring as ring_viz

    report = result.to_dict()
    s = DTYPES[result.dtype].itemsize
    report |= {"min_shard": ring_model.min_shard(result.hardware, result.link, result.dtype, s),
               "shard_rows": max(ring_model.sizes(result.n, result.devices, result.sharding)),
               "heads_per_device": result.heads // result.devices if result.scheme == "ulysses" else None,
               "check": check, "gradients": grads}  # fmt: skip
    if not emit_json(report, as_json, indent=None):
        console.print(ring_viz.ring_table(report))
        for line in _gradient_lines(grads):
            console.print(line, markup=False, highlight=False)
    wrong = grads is not None and not grads["tolerance"]["within"]
    return 1 if (check is not None and not check["within"]) or wrong else 0


def _gradient_lines(grads: dict | None) -> list[str]:
    """One verdict per gradient: max|g − ref| and the bound it is held to."""
    if grads is None:
        return []
    tol = grads["tolerance"]
    return [f"max |{name[0]}{name[1:].upper()} − ref| {abs_error(grads['max_abs_err'][name])}  "
            f"{'✓ within' if tol['each'][name] else '✗ outside'} its bound (≤ {abs_error(tol['bound'][name])}, "
            f"sim.api.gradient_tolerance)" for name in gradient_tolerance.GRADIENTS]  # fmt: skip


def _view(trace, step: int | None, json_path: str | None) -> int:
    from sim.cli.trace import save
    from sim.viewer import terminal, traces
    from sim.viz import listing, screen, timeline

    shown = timeline.Timeline(trace)
    traces.check_step(shown, step)
    if json_path:  # as `flashsim trace` does: written, not shown
        save(trace, json_path, len(shown))
        return 0
    if step is not None:
        console.print(screen.screen(shown, step))
    elif sys.stdin.isatty() and sys.stdout.isatty():
        terminal.interact(shown, console)
    else:
        console.print(listing.listing(shown))
    return 0


def _counting(devices: int, backward: bool, zigzag: bool) -> estimate.Estimate:
    """The closed forms' cost: P² (step, device) pairs, each counted and timed (`sim.machine.ring_model`); a
    backward's pairs cost twice a forward's, and zigzag's hold up to four pieces (600 devices: 13 s)."""
    pairs = devices * devices * (2 if backward else 1) * (2 if zigzag else 1)
    return estimate.counting() + estimate.Estimate(pairs * RING_PAIR_SECONDS)


def _refuse_too_much(ctx, counted, view: bool, **sizes) -> None:
    """Refuse, in one line naming the option, a simulation over the time or memory limits (`sim.cli.estimate`)."""
    c = counted

    def cost(n, d, batch, heads) -> estimate.Estimate:
        # every device's pieces together are one N × N attention (less under a causal mask), plus the merges
        pairs = estimate.simulate("flash2", n=n, nk=n, d=d, dtype=c.dtype, Br=c.block_rows, Bc=c.block_cols,
                                  causal=c.causal, heads=batch * heads, backward=False)  # fmt: skip
        work = pairs.times(2) if c.backward is not None else pairs
        shard = -(-n // c.devices)
        record = estimate.Estimate()
        if view:
            record = estimate.simulate("flash2", n=shard, nk=n, d=d, dtype=c.dtype, Br=c.block_rows,
                                       Bc=c.block_cols, heads=1, record=True)  # fmt: skip
        grads = estimate.check(n, n, d, batch * heads, backward=True) if c.backward is not None else estimate.Estimate()
        return estimate.process() + work + record + estimate.check(n, n, d, batch * heads) + grads

    what = f"simulating {c.devices} devices at N = {count(sizes['n'])}, d = {sizes['d']}, {count(sizes['batch'] * sizes['heads'])} heads"
    estimate.guard(ctx, cost, what, ["--counts-only"], **sizes)


COMMANDS = (ring_command,)
