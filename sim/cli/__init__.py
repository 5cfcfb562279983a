"""The `flashsim` command: the group, its one-line errors, and the registration of every command family."""

import sys

import click
from rich.console import Console

from sim.cli import bench, demo, figures, run, walkthrough
from sim.errors import FlashsimError
from sim.grading import commands as grading

# a new command family: its module in sim/cli/ with a COMMANDS tuple, and its name here
FAMILIES = (run, bench, figures, walkthrough, grading, demo)

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


for family in FAMILIES:
    for command in family.COMMANDS:
        app.add_command(command)


def main() -> None:
    """Entry point of the `flashsim` console script and of `python -m sim.cli`."""
    app()
