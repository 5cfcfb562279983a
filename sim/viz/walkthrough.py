"""The walkthrough screen: the example's inputs, every step of Algorithm 1, and the comparison at the end."""

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sim.api.results import Result
from sim.core.format import abs_error, exact_decimal_bytes, human_bytes
from sim.viz.steps import array, listing


def intro(flash: Result, q, k, v) -> RenderableType:
    """The inputs and the tiling, before the first step."""
    grid = Table.grid(padding=(0, 3))
    grid.add_row(*(Text(n, style="bold") for n in ("Q", "K", "V")))
    grid.add_row(*(array(x.tolist(), whole=True) for x in (q, k, v)))
    return Group(
        Text("FlashAttention, Algorithm 1, on N = 4 queries and keys", style="bold"),
        Text(
            f"d = {flash.d}, blocks Br = Bc = {flash.block_rows} (Tr = Tc = {-(-flash.n // flash.block_rows)}), "
            f"τ = 1/√d = {flash.scale:g}, {flash.dtype} storage, SRAM {human_bytes(flash.sram_bytes)} "
            f"({flash.hardware.name}). Tiles are numbered from 0 (the paper counts from 1)."
        ),
        Text("V is the identity, so each row of O is that query's attention weights."),
        Text(""),
        grid,
        Text(""),
    )


def ending(flash: Result, standard: Result, reference) -> RenderableType:
    """FlashAttention's output next to standard attention's, both against float64, and both traffic totals."""
    outputs = Table.grid(padding=(0, 3))
    outputs.add_row(*(Text(t, style="bold") for t in ("FlashAttention O", "standard attention O")))
    outputs.add_row(array(flash.output.tolist()), array(standard.output.tolist()))
    errors = [float(np.abs(r.output.astype(np.float64) - reference).max()) for r in (flash, standard)]
    outputs.add_row(*(Text(f"max |O − float64 reference| = {abs_error(e, 1)}", style="dim") for e in errors))
    traffic = Table(show_edge=False)
    traffic.add_column("")
    for col in ("HBM read", "HBM written", "total"):
        traffic.add_column(col, justify="right")
    for name, r in (("FlashAttention (Algorithm 1)", flash), ("standard attention (Algorithm 0)", standard)):
        traffic.add_row(name, *map(exact_decimal_bytes, (r.hbm_read_bytes, r.hbm_write_bytes, r.hbm_bytes)))
    note = Text(
        "At N = 4 FlashAttention moves more bytes: it rereads Q and round-trips O, ℓ, m once per K/V block, "
        "while standard attention's S and P are tiny. Standard attention's traffic grows with N², "
        "FlashAttention's with N²d²/M — try `flashsim run --algo flash1 --n 4096 --d 64`.",
        style="dim",
    )
    return Group(Text("Result", style="bold"), outputs, Text(""), traffic, Text(""), note)


def walkthrough(flash: Result, standard: Result, reference, q, k, v) -> RenderableType:
    """The whole walkthrough as one renderable."""
    return Group(intro(flash, q, k, v), listing(flash.trace), ending(flash, standard, reference))
