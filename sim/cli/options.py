"""The options `flashsim` commands share, each defined once; the random inputs they describe; how a command prints.

A command composes them in the order its `--help` lists them. Where commands differ in a default or a
help text, the option takes it as an argument and each command keeps its own (said at the command).
"""

import math
import os
import shlex
import sys

import click
from rich.console import Console

from sim.algorithms.registry import REGISTRY
from sim.core import strict_json
from sim.core.atomic_file import hold_pipe, special, write_text
from sim.core.dtypes import DTYPES
from sim.machine import hardware as presets
from sim.machine.trace import MAX_SIZE

MAX_COLUMNS = 1000  # a wider COLUMNS is a typo: rich would lay out every line that wide


def sane_terminal() -> None:
    """Make any terminal printable: COLUMNS and LINES that are not a size (0, -3, 10⁹, "x") are dropped (the
    terminal's own size is used), and an output encoding without ✓, τ or box drawing (latin-1, ASCII) writes
    "?" in their place instead of failing."""
    for name, most in (("COLUMNS", MAX_COLUMNS), ("LINES", MAX_COLUMNS)):
        value = os.environ.get(name)
        if value is not None and not (value.isdigit() and 0 < int(value) <= most):
            del os.environ[name]
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if encoding and not encoding.startswith("utf") and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")


sane_terminal()
console = Console(highlight=False)


class Count(click.IntRange):
    """An integer in a range that `--help` states in words ("1 or more"), not as `1<=x<=9007199254740992`."""

    def _describe_range(self) -> str:
        if self.max is None or self.max >= 2**53:
            return f"{self.min} or more"
        return f"{self.min} to {self.max}"

    def convert(self, value, param, ctx):
        number = click.INT.convert(value, param, ctx)
        if self.max is not None and self.max >= 2**53 and number > self.max:  # "not 1 or more" would be false
            self.fail(f"{number} is more than {self.max:,}, the largest it takes", param, ctx)
        return super().convert(number, param, ctx)


POSITIVE = Count(1, MAX_SIZE)  # sizes and counts: beyond 2⁵³ NumPy's integers and floats part ways (as a --load trace)
ALGORITHMS = tuple(REGISTRY)  # every forward the registry holds: a new entry there is a new --algo choice
HARDWARE = click.Choice(list(presets.PRESETS), case_sensitive=False)
STORAGE = "Storage dtype (on-chip math is fp32)."


class FloatRange(click.FloatRange):
    """click.FloatRange that refuses NaN too (every comparison with NaN is false, so click's range lets it in)."""

    def _describe_range(self) -> str:
        low = "" if self.min is None else f"{'above' if self.min_open else 'at least'} {self.min:g}"
        high = "" if self.max is None else f"{'below' if self.max_open else 'at most'} {self.max:g}"
        if self.min is not None and self.max is not None and not (self.min_open or self.max_open):
            return f"{self.min:g} to {self.max:g}"
        return " and ".join(part for part in (low, high) if part) or "any number"

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


def skippable_n(flag: str, default: int, help: str):
    """A benchmark's N that 0 skips (bench sim's --memory-n, bench cli's --n)."""
    return click.option(flag, type=Count(0, MAX_SIZE), default=default, show_default=True, help=help)


def nk(default: int | None = None, help="Key/value rows Nk  [default: N]"):
    """--nk: key/value rows; N unless given (a decode's cache has a default of its own)."""
    return click.option("--nk", type=POSITIVE, default=default, show_default=default is not None, help=help)


def d(default: int, type=POSITIVE):
    """--d: the head dimension (compare narrows the range to the kernels' d ≤ 128)."""
    return click.option("--d", type=type, default=default, show_default=True, help="Head dimension d.")


def batch(default: int):
    """--batch: independent sequences, each with its own heads."""
    return click.option("--batch", type=POSITIVE, default=default, show_default=True, help="Batch size.")


def heads(default: int):
    """--heads: attention heads per sequence (batch × heads are simulated one after another)."""
    return click.option("--heads", type=POSITIVE, default=default, show_default=True, help="Attention heads.")


def dtype(default: str, choices=tuple(DTYPES)):
    """--dtype: the storage dtype (compare narrows it to the kernels' fp16 and bf16)."""
    return click.option("--dtype", type=click.Choice(list(choices)), default=default, show_default=True, help=STORAGE)


def causal(help="Causal mask, aligned bottom-right when N ≠ Nk."):
    """--causal."""
    return click.option("--causal", is_flag=True, help=help)


def blocks(help: str):
    """--blocks: the rule for blocks not given ("fit" or the paper's)."""
    return click.option("--blocks", type=click.Choice(["fit", "paper"]), default="fit", show_default=True, help=help)


def hardware(default: str = presets.DEFAULT, help: str = "GPU preset: its SRAM per SM, bandwidth and peak FLOP/s.",
             show_default=True):  # fmt: skip
    """--hardware: a GPU preset, passed on as `hardware_name`."""
    return click.option(
        "--hardware", "hardware_name", type=HARDWARE, default=default, show_default=show_default, help=help
    )


def backward(help: str):
    """--backward: what it adds differs by command (run it too, trace it, sweep it)."""
    return click.option("--backward", is_flag=True, help=help)


def json_output(what: str = "the report", name: str = "as_json"):
    """--json [FILE], the same on every command: `--json` alone prints `what` as one strict JSON object on stdout
    instead of the tables; `--json FILE` prints the tables and writes it to FILE (passed on as "-" or the path)."""
    return click.option(
        "--json", name, is_flag=False, flag_value="-", default=None, metavar="[FILE]", callback=stdout_or_writable,
        help=f"Print {what} as JSON on stdout instead of the tables, or with FILE write it there.",
    )  # fmt: skip


FORWARD_RUNGS, BACKWARD_RUNGS = (1, 2, 3, 6), (4, 5, 7)  # gpu/registry.py's (not imported: no GPU library here)
SCALE = click.option("--scale", type=float, default=None, help="Softmax scale τ  [default: 1/√d]")
BLOCK_ROWS = click.option("--block-rows", type=POSITIVE, default=None, help="Br: rows of a Q block.")
BLOCK_COLS = click.option("--block-cols", type=POSITIVE, default=None, help="Bc: rows of a K/V block.")
SRAM_BYTES = click.option("--sram-bytes", type=POSITIVE, default=None, help="SRAM capacity  [default: the hardware's]")
SEED = click.option("--seed", type=Count(0, 2**64 - 1), default=0, show_default=True, help="Seed of the random inputs.")
QUIET = click.option(
    "--quiet", "-q", is_flag=True, help="No progress bar (there is none when stdout is not a terminal)."
)


def typed(ctx: click.Context | None) -> dict[str, click.Parameter]:
    """The parameters the user typed on the command line (the CLI reads no environment variables), by name, in the
    command's order: what a refusal may name."""
    if ctx is None:
        return {}
    source = click.core.ParameterSource.COMMANDLINE
    return {p.name: p for p in ctx.command.params if ctx.get_parameter_source(p.name) is source}


def only_with(ctx: click.Context, flag: str, takes: tuple[str, ...], why: str) -> None:
    """UsageError naming the first option typed that `flag` cannot honour (all but the parameters named in `takes`):
    nothing given is ever dropped without a word."""
    refused = [p for name, p in typed(ctx).items() if name not in takes]
    if refused:
        raise click.UsageError(f"{refused[0].opts[0]}: not with {flag} ({why})")


def writable(ctx: click.Context, param: click.Parameter, path: str | None) -> str | None:
    """A click callback: refuse, before any work, a file path that cannot be written (no such folder, a folder), and
    "-", which only --json takes for stdout (`stdout_or_writable`): the rest wrote a file named "-"."""
    if path is None:
        return path
    if path == "-":
        raise click.BadParameter("'-' is not stdout here: name a file (./- for one called '-')")
    if not path:
        raise click.BadParameter("an empty file name")
    if os.path.isdir(path):  # before `special`, which a folder also is: it would be refused after the work
        raise click.BadParameter(f"{path!r} is a folder, not a file")
    if special(path):  # a device or a pipe (/dev/stdout, /dev/null): written directly; a pipe is opened now,
        try:  # before the work, and refused if nobody reads it (`sim.core.atomic_file.hold_pipe`)
            hold_pipe(path)
        except OSError as e:
            raise click.BadParameter(f"{path!r}: {e.strerror}") from None
        return path
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise click.BadParameter(f"no folder {folder!r} to write {os.path.basename(path)!r} in")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise click.BadParameter(f"{path!r} cannot be written here (permissions)")
    return path


def stdout_or_writable(ctx: click.Context, param: click.Parameter, path: str | None) -> str | None:
    """`writable`, but "-" passes: stdout."""
    return path if path == "-" else writable(ctx, param, path)


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


JSON_REPORT = json_output("the report", name="json_path")


def command_line() -> str:
    """This invocation as the user would type it (`flashsim …`), for reports that record their command."""
    return shlex.join(["flashsim", *sys.argv[1:]])


def print_json(obj) -> None:
    """One strict JSON object on stdout (`sim.core.strict_json`: non-finite numbers as strings)."""
    sys.stdout.write(strict_json.dumps(obj) + "\n")


def emit_json(obj, where: str | None, indent: int | None = 2) -> bool:
    """`--json [FILE]`'s output: on stdout for "-", else to the file, atomically; whether it went to stdout."""
    if where == "-":
        print_json(obj)
        return True
    if where:
        write_text(where, strict_json.dumps(obj, indent=indent) + "\n")
    return False


OLD_KERNEL_NAMES = ("v1", "v2", "v3", "v4")  # the rungs' names before issue 19, taken with a warning until run 40


class Rung(click.Choice):
    """A kernel's rung number among `choices`; a former name (v1 … v4) is refused with the rung it now is."""

    def convert(self, value, param, ctx):
        if value in OLD_KERNEL_NAMES:
            self.fail(
                f"{value} is an old name: write the rung number (forward v1, v2, v3, v4 are rungs 1, 2, 3, 6; "
                "backward v1, v2 are rungs 4, 5)",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)


def kernel(rungs: tuple[int, ...], help: str):
    """--kernel N: a GPU kernel by its rung on the ladder (its file's prefix: 06_flash2_wgmma_tma.cu is rung 6)."""
    return click.option("--kernel", type=Rung([str(r) for r in rungs]), default=None, help=help)
