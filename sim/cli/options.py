"""The options `flashsim` commands share, each defined once; the random inputs they describe; how a command prints.

A command composes them in the order its `--help` lists them. Where commands differ in a default or a
help text, the option takes it as an argument and each command keeps its own (said at the command).
"""

import json
import math
import os
import shlex
import sys

import click
from rich.console import Console

from sim.algorithms.registry import REGISTRY
from sim.core.dtypes import DTYPES
from sim.machine import hardware as presets

console = Console(highlight=False)

POSITIVE = click.IntRange(1, 2**53)  # sizes and counts: beyond 2⁵³ NumPy's integers and floats part ways
ALGORITHMS = tuple(REGISTRY)  # every forward the registry holds: a new entry there is a new --algo choice
HARDWARE = click.Choice(list(presets.PRESETS), case_sensitive=False)
STORAGE = "Storage dtype (on-chip math is fp32)."


class FloatRange(click.FloatRange):
    """click.FloatRange that refuses NaN too (every comparison with NaN is false, so click's range lets it in)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


def algo(choices=ALGORITHMS, help="Algorithm to simulate."):
    """--algo: which listing runs (flash2 unless given)."""
    return click.option("--algo", type=click.Choice(list(choices)), default="flash2", show_default=True, help=help)


def n(default: int, help="Query rows N."):
    """--n: query rows (run, trace, compare) or the sequence length of a benchmark."""
    return click.option("--n", type=POSITIVE, default=default, show_default=True, help=help)


def nk(default: int | None = None, help="Key/value rows Nk  [default: N]"):
    """--nk: key/value rows; N unless given (a decode's cache has a default of its own)."""
    return click.option("--nk", type=POSITIVE, default=default, show_default=default is not None, help=help)


def d(default: int, type=POSITIVE):
    """--d: the head dimension (compare narrows the range to the kernels' d ≤ 128)."""
    return click.option("--d", type=type, default=default, show_default=True, help="Head dimension d.")


def batch(default: int):
    """--batch."""
    return click.option("--batch", type=POSITIVE, default=default, show_default=True)


def heads(default: int):
    """--heads."""
    return click.option("--heads", type=POSITIVE, default=default, show_default=True)


def dtype(default: str, choices=tuple(DTYPES)):
    """--dtype: the storage dtype (compare narrows it to the kernels' fp16 and bf16)."""
    return click.option("--dtype", type=click.Choice(list(choices)), default=default, show_default=True, help=STORAGE)


def causal(help="Causal mask, aligned bottom-right when N ≠ Nk."):
    """--causal."""
    return click.option("--causal", is_flag=True, help=help)


def blocks(help: str):
    """--blocks: the rule for blocks not given ("fit" or the paper's)."""
    return click.option("--blocks", type=click.Choice(["fit", "paper"]), default="fit", show_default=True, help=help)


def hardware(default: str = presets.DEFAULT, help: str | None = None, show_default=True):
    """--hardware: a GPU preset, passed on as `hardware_name`."""
    return click.option(
        "--hardware", "hardware_name", type=HARDWARE, default=default, show_default=show_default, help=help
    )


def backward(help: str):
    """--backward: what it adds differs by command (run it too, trace it, sweep it)."""
    return click.option("--backward", is_flag=True, help=help)


def json_flag(help="Print one JSON object instead of the table."):
    """--json: print JSON instead of the table (passed on as `as_json`)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


SCALE = click.option("--scale", type=float, default=None, help="Softmax scale τ  [default: 1/√d]")
BLOCK_ROWS = click.option("--block-rows", type=POSITIVE, default=None, help="Br: rows of a Q block.")
BLOCK_COLS = click.option("--block-cols", type=POSITIVE, default=None, help="Bc: rows of a K/V block.")
SRAM_BYTES = click.option("--sram-bytes", type=POSITIVE, default=None, help="SRAM capacity  [default: the hardware's]")
SEED = click.option(
    "--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the random inputs (0 or more)."
)
QUIET = click.option(
    "--quiet", "-q", is_flag=True, help="No progress bar (there is none when stdout is not a terminal)."
)


def writable(ctx: click.Context, param: click.Parameter, path: str | None) -> str | None:
    """A click callback: refuse, before any work, a file path that cannot be written (no such folder, a folder)."""
    if path is None:
        return None
    if not path:
        raise click.BadParameter("an empty file name")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise click.BadParameter(f"{path!r} is a folder, not a file")
    if not os.path.isdir(folder):
        raise click.BadParameter(f"no folder {folder!r} to write {os.path.basename(path)!r} in")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise click.BadParameter(f"{path!r} cannot be written here (permissions)")
    return path


def output_file(flag: str, name: str, help: str, default: str | None = None):
    """An option naming a file the command writes, checked before it works (`writable`)."""
    return click.option(
        flag, name, type=click.Path(dir_okay=False), default=default, show_default=default is not None,
        callback=writable, help=help,
    )  # fmt: skip


def makeable(ctx: click.Context, param: click.Parameter, path: str | None) -> str | None:
    """A click callback: refuse, before any work, a folder that is not one or cannot be made here (the folder
    itself is made; the folders above it must exist)."""
    if path is None:
        return None
    if not path:
        raise click.BadParameter("an empty folder name")
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise click.BadParameter(f"{path!r} is a file, not a folder")
        if not os.access(path, os.W_OK):
            raise click.BadParameter(f"{path!r} cannot be written here (permissions)")
        return path
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise click.BadParameter(f"no folder {parent!r} to make {os.path.basename(path)!r} in")
    if not os.access(parent, os.W_OK):
        raise click.BadParameter(f"{path!r} cannot be made here (permissions)")
    return path


def output_folder(flag: str, name: str, help: str):
    """An option naming a folder the command writes into (made if missing), checked before it works (`makeable`)."""
    return click.option(flag, name, type=click.Path(file_okay=False), default=None, callback=makeable, help=help)


JSON_REPORT = output_file("--json", "json_path", "Also write the report here.")


def command_line() -> str:
    """This invocation as the user would type it (`flashsim …`), for reports that record their command."""
    return shlex.join(["flashsim", *sys.argv[1:]])


def print_json(obj) -> None:
    """One JSON object on stdout (infinities as ±Infinity, as Python's json writes them)."""
    sys.stdout.write(json.dumps(obj) + "\n")


OLD_KERNEL_NAMES = {
    "v1": 1,
    "v2": 2,
    "v3": 3,
    "v4": 6,
}  # the forward rungs' names before issue 19 (backward: v1 4, v2 5)


def kernel(rungs: tuple[int, ...], help: str):
    """--kernel N: a GPU kernel by its rung on the ladder (`rung` reads it, old names included)."""
    choices = [*map(str, rungs), *OLD_KERNEL_NAMES]
    return click.option("--kernel", type=click.Choice(choices), default=None, help=help)


def rung(kernel: str | None, backward: bool = False) -> int | None:
    """--kernel's rung; an old name (v1 … v4, and with --backward v1, v2) still works for one release, with a
    one-line warning on stderr."""
    if kernel is None or kernel.isdigit():
        return None if kernel is None else int(kernel)
    number = {"v1": 4, "v2": 5}[kernel] if backward and kernel in ("v1", "v2") else OLD_KERNEL_NAMES[kernel]
    Console(stderr=True, highlight=False).print(
        f"warning: --kernel {kernel} is the old name of rung {number}: write --kernel {number} "
        "(the v-names go in the next release)",
        soft_wrap=True,
    )
    return number
