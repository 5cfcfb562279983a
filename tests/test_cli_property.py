"""Every command, every option, random, extreme and malformed values: never a traceback.

Each example picks a command and gives a few of its options values drawn by the option's type (negative,
zero, one, small, huge, NaN, infinities, words, empty, unknown names, unwritable paths). The answer is exit 0
with output, or exit 2 with one line on stderr, `error: …`, naming an option of the command. What would not
fit or would take too long is refused by the estimate before any work, which keeps the huge values cheap.
"""

import re

import click
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.cli import app

INTS = ["-1", "0", "1", "2", "7", "33", "1000000000000", "-99999999999999999999", "nan", "inf", "abc", "", "1e3",
        "2.5", str(2**64)]  # fmt: skip
FLOATS = ["-1", "0", "0.5", "3", "1e308", "-1e308", "nan", "inf", "-inf", "abc", ""]
LISTS = ["1", "7", "0", "-5", "1,2", "64,128", "a,b", "1,,2", "99999999999999", "", "nan"]
PATHS = ["/nonexistent/dir/out.json", "{tmp}/out.file", "", "{tmp}"]
WORDS = ["unknown", "", "FLASH2", "fp8", "B200"]
# small sizes for the options an example leaves alone, so that the valid examples stay quick
QUICK = {
    ("run",): ["--n", "16", "--d", "8"],
    ("trace",): ["--n", "8"],
    ("decode",): ["--nk", "256", "--d", "16"],
    ("bench", "sim"): ["--n", "64", "--d", "16", "--repeats", "1", "--memory-n", "0"],
    ("bench", "trace"): ["--n", "32", "--d", "4", "--hardware", "toy", "--keys", "1"],
    ("bench", "cli"): ["--n", "64", "--d", "16", "--counts-n", "64"],
    ("compare",): ["--n", "64"],
    ("sweep",): ["--n", "512"],
}


def commands(group: click.Group, path=()):
    """(path, command) of every leaf command."""
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


# the grader's commands (`flashsim grade`, `assignments`, `bench grade`: sim/grading/commands.py) take positional
# paths and run students' code in a sandbox; they are the grading helper's, and left to its own tests
COMMANDS = [
    (path, command) for path, command in commands(app) if not command.callback.__module__.startswith("sim.grading")
]


def values(option: click.Option) -> st.SearchStrategy:
    """The strings one option is given: its own choices and the malformed, by its type."""
    kind = option.type
    if option.is_flag:
        return st.just(None)
    if isinstance(kind, click.Choice):
        return st.sampled_from([*kind.choices, *WORDS])
    if isinstance(kind, click.Path):
        return st.sampled_from(PATHS)
    if isinstance(kind, (click.FloatRange, type(click.FLOAT))):
        return st.sampled_from(FLOATS)
    if isinstance(kind, (click.IntRange, type(click.INT))):
        return st.sampled_from(INTS)
    return st.sampled_from(LISTS)  # the comma-separated lists of sweep and decode


@st.composite
def invocations(draw):
    path, command = draw(st.sampled_from(COMMANDS))
    options = [p for p in command.params if isinstance(p, click.Option) and p.name != "help"]
    chosen = draw(st.lists(st.sampled_from(options), min_size=1, max_size=3, unique_by=lambda p: p.name))
    args = list(QUICK.get(path, []))
    for option in chosen:
        value = draw(values(option))
        args += [option.opts[0]] + ([] if value is None else [value])
    return path, command, args


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(invocation=invocations())
def test_every_command_answers_every_value_without_a_traceback(invocation, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, command, args = invocation
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = CliRunner().invoke(app, [*path, *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exc_info)
    assert result.exit_code in (0, 2), (path, args, result.exit_code, result.output)
    if result.exit_code == 0:
        assert result.stdout.strip(), (path, args)
        return
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (path, args, result.stderr)
    flags = [o for p in command.params for o in p.opts if o.startswith("--")]
    named = [f for f in flags if re.search(rf"{re.escape(f)}(?![\w-])", lines[0])]
    assert named or "GPU" in lines[0], (path, args, lines[0])  # the GPU commands without one: what is missing
