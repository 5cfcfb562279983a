"""Every command, every option, random, extreme and malformed values: never a traceback.

Every command (the grader's and `demo train` included) gets `EXAMPLES` examples; each gives a few of its options
values drawn by the option's type (negative, zero, one, small, huge, NaN, infinities, words, empty, unknown names,
paths into missing folders, onto folders and files). The answer is exit 0 with output, or exit 2 with one line on
stderr, `error: …`, naming an option of the command. What would not fit or would take too long is refused by the
estimate before any work, which keeps the huge values cheap; the grader's commands grade a two-test assignment.
"""

import re
from pathlib import Path

import click
import pytest
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
TINY = str(Path(__file__).parent / "grading_submissions" / "tiny" / "01_tiny_softmax.py")  # two tests, ~0.3 s
# small sizes for the options an example leaves alone, so that the valid examples stay quick; the grader's
# commands grade the tiny assignment against its own master (ASSIGNMENT and SUBMISSION), never a full suite
QUICK = {
    ("run",): ["--n", "16", "--d", "8"],
    ("trace",): ["--n", "8"],
    ("decode",): ["--nk", "256", "--d", "16"],
    ("bench", "sim"): ["--n", "64", "--d", "16", "--repeats", "1", "--memory-n", "0"],
    ("bench", "trace"): ["--n", "32", "--d", "4", "--hardware", "toy", "--keys", "1"],
    ("bench", "cli"): ["--n", "0", "--d", "16", "--counts-n", "64", "--repeats", "1"],
    ("compare",): ["--n", "64"],
    ("sweep",): ["--n", "512"],
    ("grade",): [TINY, TINY],
    ("assignments", "export"): [TINY],
    ("bench", "grade"): ["--n", "1"],
    ("lessons", "copy"): ["{tmp}/lessons"],
}
LIMITS = {("bench", "grade"): "2"}  # FLASHSIM_MAX_SECONDS: bench grade grades assignment 2, ~1 s a submission


def commands(group: click.Group, path=()):
    """(path, command) of every leaf command."""
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


COMMANDS = list(commands(app))
EXAMPLES = 15  # per command: every command is driven, whatever hypothesis happens to draw


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


def invocations(path: tuple[str, ...], command: click.Command) -> st.SearchStrategy:
    """One to three of the command's options, each with a drawn value, after its QUICK arguments."""
    options = [p for p in command.params if isinstance(p, click.Option) and p.name != "help"]
    chosen = (
        st.lists(st.sampled_from(options), min_size=1, max_size=3, unique_by=lambda p: p.name)
        if options
        else st.just([])
    )
    return chosen.flatmap(
        lambda chosen: st.tuples(
            *(values(o).map(lambda v, o=o: [o.opts[0]] + ([] if v is None else [v])) for o in chosen)
        )
    ).map(lambda given: list(QUICK.get(path, [])) + [a for pair in given for a in pair])


@pytest.mark.parametrize("path,command", COMMANDS, ids=[" ".join(path) for path, _ in COMMANDS])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_command_answers_every_value_without_a_traceback(path, command, data, tmp_path, monkeypatch):
    args = data.draw(invocations(path, command), label="args")
    monkeypatch.chdir(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if path in LIMITS:
        monkeypatch.setenv("FLASHSIM_MAX_SECONDS", LIMITS[path])
    else:
        monkeypatch.delenv("FLASHSIM_MAX_SECONDS", raising=False)
    result = CliRunner().invoke(app, [*path, *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exc_info)
    assert result.exit_code in (0, 2), (path, args, result.exit_code, result.output)
    if result.exit_code == 0:
        assert result.stdout.strip(), (path, args)
        return
    lines = [line for line in result.stderr.splitlines() if not line.startswith("warning: ")]  # e.g. an old name
    assert len(lines) == 1 and lines[0].startswith("error: "), (path, args, result.stderr)
    flags = [o for p in command.params for o in p.opts if o.startswith("--")]
    named = [f for f in flags if re.search(rf"{re.escape(f)}(?![\w-])", lines[0])]
    # the GPU commands without one say what is missing; a value that looks like an option ("--json -5") is named
    assert named or "GPU" in lines[0] or "No such option" in lines[0], (path, args, lines[0])
