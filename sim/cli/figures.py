"""`flashsim paper fig2`, `sweep` and `decode`: the paper's Figure 2, the roofline sweep, Flash-Decoding."""

import sys

import click
import numpy as np

import sim
from sim import hardware, paper, reference, sweep
from sim import occupancy as decoding
from sim.cli import options
from sim.cli.options import console, print_json
from sim.dtypes import itemsize
from sim.errors import InputError
from sim.format import abs_error
from sim.inputs import random_inputs
from sim.viz import decode as decode_viz
from sim.viz import paper as paper_viz
from sim.viz import sweep as sweep_viz


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


@click.group("paper")
def paper_group() -> None:
    """The FlashAttention paper's figures, reproduced by counting."""


@paper_group.command("fig2")
@options.hardware("A100-40GB", "GPU of the time estimate.")  # the paper's GPU, not the simulator's default
@options.json_flag("Print one JSON object instead of the tables.")
def paper_fig2_command(hardware_name, as_json) -> None:
    """Figure 2: GPT-2 medium attention, forward + backward, standard vs FlashAttention, beside the paper's numbers."""
    fig = paper.figure2(hardware_name)
    if as_json:
        print_json(fig.to_dict())
    else:
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
@options.algo(("flash1", "flash2"), "FlashAttention variant.")
@options.backward("Forward + backward  [default: the forward pass]")
@options.json_flag()
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
@options.json_flag()
def decode_command(nk, queries, d, batch, heads, dtype, hardware_name, splits, as_json) -> None:
    """Flash-Decoding: how many SMs one thread block per (batch, head) keeps busy, and splitting the K/V cache."""
    hw, s = hardware.get(hardware_name), itemsize(dtype)
    if splits and max(splits) > nk:
        raise InputError(f"--splits: {max(splits)} chunks of the {nk} keys would leave some empty; choose 1 … {nk}")
    best = decoding.best_splits(batch, heads, queries, nk, d, s, hw)
    choices = splits or sorted({1, best, *(2**i for i in range(1, 8) if 2**i <= min(nk, 2 * best))})
    rows = [decoding.occupancy(batch, heads, P, queries, nk, d, s, hw) for P in choices]
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
    console.print(
        f"one head simulated with {best} splits: max |O − ref| = {abs_error(err, 2)} against float64", style="dim"
    )


COMMANDS = (paper_group, sweep_command, decode_command)
