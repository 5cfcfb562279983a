"""Every command, every option, hostile values (issue 21): never a traceback, an exit code in {0, 1, 2}, strict JSON
on stdout where `--json` asked for it, and no file left half-written; in a fresh process, any COLUMNS, time limit
and output encoding too.

In-process through click's runner (fast); FLASHSIM_MAX_SECONDS = 2 keeps whatever is let through small.
"""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.cli import app

ROOT = Path(__file__).resolve().parents[1]
SENTINEL = "a file that was there before"
WORDS = ["", "0", "-1", "1", "3", "17", "64", "1e3", "2e9", "9" * 30, "nan", "inf", "-inf", "1,024", "1_024", "x",
         "🙂", "--n", "fp16", "flash2", "toy", "v4", "6", "paper"]  # fmt: skip


def leaves(group=app, path=()):
    """(command path, command) for every command under `group`."""
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from leaves(command, (*path, name))
        else:
            yield (*path, name), command


COMMANDS = list(leaves())


def is_path(param: click.Parameter) -> bool:
    return isinstance(param.type, click.Path) or param.metavar == "[FILE]" or param.name.endswith("_path")


@st.composite
def invocations(draw, folder: Path):
    """A command and a random selection of its options, each with a value of a random kind (or a file path)."""
    path, command = draw(st.sampled_from(COMMANDS))
    args, files = list(path), []
    options = [p for p in command.params if isinstance(p, click.Option) and p.opts[0] not in ("--help",)]
    for param in draw(st.lists(st.sampled_from(options), max_size=4, unique_by=lambda p: p.name)) if options else []:
        flag = param.opts[0]
        if param.is_flag:
            args.append(flag)
            continue
        if is_path(param):
            name = draw(st.sampled_from(["out.json", "out.svg", "out.png", "sub/none.json", ".", "/dev/full", "-"]))
            # "." is the folder itself, never the working directory (the run must not write into the checkout)
            target = Path(name) if name.startswith(("/", "-")) else folder / name
            if name == "-" and param.metavar == "[FILE]":
                args.append(flag)  # --json alone: JSON on stdout
                continue
            files.append(target)
            args += [flag, str(target)]
            continue
        choices = list(getattr(param.type, "choices", []))
        value = draw(st.one_of(st.sampled_from(WORDS), st.integers(-(2**70), 2**70).map(str), st.sampled_from(choices)
                               if choices else st.integers(1, 48).map(str)))  # fmt: skip
        args += [flag, value]
    if draw(st.booleans()) and path[0] in ("grade", "assignments"):
        args.append(draw(st.sampled_from(["02", "99", str(folder), "/nonexistent.py"])))
    return args, files


def strictly(constant: str):
    raise ValueError(f"not strict JSON: {constant}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_traceback_and_an_honest_exit_code(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("fuzz")
    args, files = data.draw(invocations(folder))
    for f in files:
        if f.parent == folder:
            f.write_text(SENTINEL)
    env = {"FLASHSIM_MAX_SECONDS": data.draw(st.sampled_from(["2", "2", "2", "-5", "nan", "0.5", "x"]))}
    with contextlib.chdir(folder):  # a file named "-" or a relative path lands in the test's folder, not the checkout
        result = CliRunner(env=env).invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output)
    if result.exit_code == 2:
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: "), (args, result.stderr)
    after = args[args.index("--json") + 1 :][:1] if "--json" in args else None
    if result.exit_code in (0, 1) and after is not None and (not after or after[0].startswith("--")):
        json.loads(result.stdout, parse_constant=strictly)  # --json alone: one strict JSON object on stdout
    for f in files:
        if f.parent == folder and f.exists() and f.is_file():
            assert result.exit_code in (0, 1) or f.read_bytes() == SENTINEL.encode(), (
                args,
                "file changed by a failed run",
            )
    leftovers = [p.name for p in folder.rglob(".*.tmp")]
    assert not leftovers, (args, leftovers)


@settings(max_examples=8, deadline=None)
@given(
    columns=st.sampled_from(["0", "-1", "20", "80", "1000000", "abc", ""]),
    encoding=st.sampled_from(["utf-8", "ascii", "latin-1", "cp1252"]),
    limit=st.sampled_from(["2", "-5", "nan", "inf"]),
    args=st.sampled_from([["run", "--n", "48", "--d", "8"], ["walkthrough"], ["run", "--counts-only", "--backward"],
                          ["trace", "--n", "8", "--step", "3"], ["decode", "--nk", "256", "--heads", "2"]]),
)  # fmt: skip
def test_any_terminal_and_environment(columns, encoding, limit, args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": columns, "PYTHONIOENCODING": encoding,
           "FLASHSIM_MAX_SECONDS": limit}  # fmt: skip
    result = subprocess.run([sys.executable, "-m", "sim.cli", *args], env=env, capture_output=True, timeout=120)
    assert b"Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.returncode in (0, 1, 2), result.returncode
    if result.returncode == 2:  # only a malformed time limit is wrong here
        assert limit in ("-5", "nan") and result.stderr.decode(encoding, "replace").startswith("error: FLASHSIM_MAX")
    else:
        assert result.stdout.strip(), result.stderr
