"""The `flashsim` command: the group, its one-line errors, and the registration of every command family."""

import importlib
import os
import sys

import click
from rich.console import Console

from sim.core import atomic_file
from sim.core.errors import FlashsimError
from sim.machine.blocks import PAPER_RULE
from sim.viewer import guard

# a new command family: its module in sim/cli/ with a COMMANDS tuple, and its name here
FAMILIES = {  # module in sim/cli/ → the names of its COMMANDS (imported on first use: `flashsim run` starts fast)
    "run": ("run", "compare", "compare-decode"),
    "trace": ("trace",),
    "bench": ("bench",),
    "figures": ("paper", "sweep", "decode"),
    "walkthrough": ("walkthrough",),
    "grading": ("assignments", "grade"),
    "demo": ("demo",),
    "lessons": ("lessons",),
    "ring": ("ring",),
}

ALIASES = {"trace": "load_path", "q": "n", "k": "nk", "alibi_slopes": "alibi"}  # arguments whose option differs
SRAM_SUSPECTS = ("--d", "--sram-bytes", "--hardware", "--nk", "--n")  # what makes even the smallest blocks too big
BLOCK_SUSPECTS = ("--block-rows", "--block-cols", "--block", "--queries", "--d", "--sram-bytes", "--hardware")
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click ≥ 8.2
INTERRUPTED = 130  # the exit code after Ctrl-C, as shells give 128 + SIGINT
EXIT_CODES = """Exit codes: 0 success; 1 a verdict or a grade that failed (a run outside its tolerance, a submission
below full marks); 2 a usage or input error (one line on stderr); 130 interrupted (Ctrl-C), 143 SIGTERM, 129 SIGHUP.
A closed pipe (`flashsim … | head`) ends quietly with 0."""


class _Commands(dict):
    """A group's commands by name, each family's module imported when one of its commands is first looked up."""

    def __init__(self, modules: dict[str, str]):
        super().__init__(dict.fromkeys(modules))
        self.modules = modules

    def __getitem__(self, name: str) -> click.Command:
        if dict.__getitem__(self, name) is None:
            family = importlib.import_module(f"sim.cli.{self.modules[name]}")
            for command in family.COMMANDS:
                dict.__setitem__(self, command.name, command)
        return dict.__getitem__(self, name)

    def get(self, name, default=None):
        return self[name] if name in self else default

    def values(self):
        return [self[name] for name in self]

    def items(self):
        return [(name, self[name]) for name in self]


class _Group(click.Group):
    """Reports usage errors and `FlashsimError`s on one line to stderr with exit code 2."""

    def _leaf(self, args) -> tuple[click.Command, list[str]] | None:
        return _leaf_command(self, list(sys.argv[1:] if args is None else args))

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        # rich fixes a Console's width from COLUMNS when the console is made (the first command that imports
        # sim.cli.options); a process that runs several commands (tests, notebooks) measures it again for each
        if "sim.cli.options" in sys.modules:
            sys.modules["sim.cli.options"].console._width = None
        try:
            with guard.guarded(), atomic_file.pipes_held():
                rv = super().main(args, prog_name or "flashsim", complete_var, standalone_mode=False, **extra)
                _flush_stdout()  # a full disk or a closed pipe shows here, not at exit
        except _NO_ARGS_IS_HELP as e:  # a bare `flashsim` or `flashsim bench`: show the help, not an error
            click.echo(e.ctx.get_help())
            sys.exit(0)
        except click.UsageError as e:
            where = f"{e.ctx.command_path}: " if e.ctx else ""
            fail(f"{where}{e.format_message()}")
        except FlashsimError as e:
            fail(as_option(str(e), self._leaf(args)))
        except (click.exceptions.Abort, KeyboardInterrupt):  # Ctrl-C (click turns it into Abort)
            _quiet_stdout()
            sys.exit(INTERRUPTED)
        except guard.Terminated as e:  # SIGTERM, SIGHUP: everything unwound, the terminal put back
            _quiet_stdout()
            sys.exit(128 + e.signum)
        except BrokenPipeError:  # `flashsim … | head`: the reader has what it wanted
            _quiet_stdout()
            sys.exit(0)
        except MemoryError:  # an estimate let through what this machine could not hold after all
            given = list(sys.argv[1:] if args is None else args)
            counts = "--counts-only" in given or "run" not in given
            fail(
                "out of memory: this machine could not hold the work; try smaller sizes"
                + ", or --counts-only" * (not counts)
            )
        except OSError as e:  # a file that cannot be written or read (/dev/full, a read-only folder)
            _quiet_stdout()  # its buffer may hold what could not be written
            fail(f"{e.filename}: {e.strerror}" if e.filename else f"cannot write the output: {e.strerror or e}")
        sys.exit(rv if isinstance(rv, int) else 0)


def as_option(message: str, command: tuple[click.Command, list[str]] | None = None) -> str:
    """A library error's `argument: …` as the option of `command` (the command run, and the arguments it was given)
    that sets it: `block_rows: …` → `--block-rows: …`."""
    name, colon, rest = message.partition(": ")
    if not colon or name.startswith("--") or command is None:
        return message
    command, given = command
    options = {p.name.removesuffix("_name"): p.opts[0] for p in command.params if p.opts[0].startswith("--")}
    if name == "blocks" and rest.startswith(PAPER_RULE):
        option = "--blocks paper"
    elif name in ("blocks", "SRAM overflow"):  # blocks that do not fit: the options given that set their size
        typed_blocks = any(o in given for o in BLOCK_SUSPECTS[:4])  # (red team 95: the blocks typed went unnamed)
        smallest = "smallest" in rest or (name == "SRAM overflow" and not typed_blocks)
        suspects = SRAM_SUSPECTS if smallest else BLOCK_SUSPECTS
        named = [o for o in suspects if o in given] or [
            "--hardware" if "--hardware" in options.values() else suspects[0]
        ]
        option = ", ".join(named)
        rest = message if name == "SRAM overflow" else rest
    else:
        option = options.get(name) or options.get(ALIASES.get(name, ""))
    return f"{option}: {rest}" if option else message


def _leaf_command(group: click.Group, args: list[str]) -> tuple[click.Command, list[str]] | None:
    """The command `args` run (through any subgroups), and the options given to it."""
    command, rest = group, list(args)
    while isinstance(command, click.Group) and rest and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
    return None if isinstance(command, click.Group) else (command, [a.split("=")[0] for a in rest])


def _flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise OSError(e.errno, e.strerror, "stdout") from None


def _print_version(ctx: click.Context, param, value: bool) -> None:
    """--version: `flashsim 0.1.0` (looked up only when asked: importlib.metadata takes a tenth of a second)."""
    if value:
        click.echo(f"flashsim {_version()}")
        ctx.exit()


def _version() -> str:
    """flashsim's version: the installed package's, or, run from a checkout (`python -m sim.cli`), pyproject's."""
    from importlib import metadata

    try:
        return metadata.version("flashsim")
    except metadata.PackageNotFoundError:
        import tomllib

        with open(os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml"), "rb") as f:
            return tomllib.load(f)["project"]["version"]


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: what is left in its buffer (a closed pipe's) must not fail again at exit."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (a test's): nothing to flush at exit
        pass


def fail(message: str) -> None:
    """Print `error: message` on one line to stderr and exit with code 2."""
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"error: {message}", markup=False)
    sys.exit(2)


@click.group("flashsim", cls=_Group, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and exit.")  # fmt: skip
def app() -> None:
    """flashsim: FlashAttention, made visible."""


app.commands = _Commands({name: module for module, names in FAMILIES.items() for name in names})


def main() -> None:
    """Entry point of the `flashsim` console script and of `python -m sim.cli`."""
    app()
