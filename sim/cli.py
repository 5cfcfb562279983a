"""The `flashsim` command: small functions that call the library and hand its results to `sim.viz`."""

import sys

import click
import typer
from rich.console import Console

from sim.errors import FlashsimError


class _Group(typer.core.TyperGroup):
    """Reports usage errors and `FlashsimError`s on one line to stderr with exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args, prog_name or "flashsim", complete_var, standalone_mode=False, **extra)
        except click.UsageError as e:
            where = f"{e.ctx.command_path}: " if e.ctx else ""
            _fail(f"{where}{e.format_message()}")
        except FlashsimError as e:
            _fail(str(e))
        except click.exceptions.Abort:
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


def _fail(message: str) -> None:
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"error: {message}", markup=False)
    sys.exit(2)


app = typer.Typer(
    cls=_Group,
    help="flashsim: FlashAttention, made visible.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
bench_app = typer.Typer(cls=_Group, help="Benchmarks: print a table, optionally write JSON.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


def main() -> None:
    """Entry point of the `flashsim` console script."""
    app()
