"""The README's shell examples, run, and every figure the README quotes from them, checked, so that it cannot drift.

Each ```console block holds `$ flashsim …` lines, each followed by an excerpt of what that command prints ("…"
stands for lines left out, and within a line for what is left out of it: a float32 error's leading digits, which
the machine's BLAS moves): the command runs here (at 100 columns), and every line of the excerpt must appear in
its output, in order, spaces aside. A command ending in `| wc -l` is checked by its number of lines (at the
80 columns a pipe gets). Figures the
prose quotes are listed below with the command they come from. The benchmark tables quote measured times, which no
test takes again: they must say what the run stored in sim/lab/results/ measured.
"""

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from sim.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
WIDTH = "100"
PIPED = "80"  # what rich lays out for a pipe where COLUMNS is not set

# figures the prose quotes, each with the command whose output has them
PROSE = [
    ("walkthrough", ["736 B", "512 B"]),
    ("paper fig2", ["16 times", "4.4 GB", "256–512", "7.0 more such passes", "824.6", "962.1"]),
    ("decode", ["16 │", "(of 108)", "the fastest, 13 splits", "6.1×"]),
    ("sweep", ["N = 8,192", "A100-40GB"]),
    ("run --algo flash1 --blocks paper", ["189.0 KiB", "163.0 KiB"]),
]
PROSE_IN_README = {  # how the README writes those figures, where it words them its own way
    "16 │": "16 of an A100's 108 SMs",
    "(of 108)": "108 SMs",
    "the fastest, 13 splits": "13 splits",
    "N = 8,192": "at N = 8192",
    "7.0 more such passes": "7 more passes",
    "16 times": "16 times",
}


def examples() -> list[tuple[str, list[str]]]:
    """(command after `flashsim`, excerpt lines) of every `$ flashsim` line in the README's console blocks."""
    found = []
    for block in re.findall(r"```console\n(.*?)```", README, re.S):
        command = None
        for line in block.splitlines():
            if line.startswith("$ flashsim"):
                command = line.removeprefix("$ flashsim").strip()
                found.append((command, []))
            elif command is not None:
                found[-1][1].append(line)
    return found


def flashsim(command: str, width: str = WIDTH):
    """Run `flashsim COMMAND` as a user would at `width` columns; (exit code, what it printed, stdout then stderr)."""
    result = CliRunner().invoke(app, shlex.split(command), env={"COLUMNS": width})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result.exit_code, result.stdout + result.stderr


def squeeze(text: str) -> str:
    return " ".join(text.split())


def holds(want: str, line: str) -> bool:
    """Whether `line` holds `want`'s pieces between its "…"s, in order."""
    at = 0
    for piece in (p.strip() for p in want.split("…")):
        found = line.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def appears_in_order(excerpt: list[str], output: str) -> None:
    lines = [squeeze(line) for line in output.splitlines()]
    at = 0
    for want in (squeeze(line) for line in excerpt if line.strip() not in ("", "…")):
        while at < len(lines) and not holds(want, lines[at]):
            at += 1
        assert at < len(lines), f"{want!r} is not in the output (in order):\n{output}"
        at += 1


def test_the_readme_has_its_examples():
    commands = [command for command, _ in examples()]
    assert len(commands) >= 10 and "walkthrough" in commands and any("--counts-only" in c for c in commands)


@pytest.mark.parametrize("command,excerpt", examples(), ids=[c for c, _ in examples()])
def test_each_example_prints_what_the_readme_shows(command, excerpt):
    command, _, pipe = command.partition("|")
    code, output = flashsim(command, PIPED if pipe else WIDTH)
    assert code == (2 if excerpt and excerpt[0].startswith("error:") else 0), output
    if pipe.strip() == "wc -l":
        assert [str(len(output.splitlines()))] == [line.strip() for line in excerpt if line.strip()]
    else:
        assert not pipe, f"the README pipes into {pipe!r}, which this test does not know"
        appears_in_order(excerpt, output)


@pytest.mark.parametrize("command,figures", PROSE, ids=[c for c, _ in PROSE])
def test_the_figures_the_prose_quotes(command, figures):
    _, output = flashsim(command)
    text = squeeze(output)
    for figure in figures:
        assert figure in text, (command, figure)
        assert PROSE_IN_README.get(figure, figure) in squeeze(README), figure


def test_the_gpt2_medium_table_is_what_counts_only_prints():
    names = {"standard": "standard attention", "flash1": "FlashAttention (Algorithm 1)", "flash2": "FlashAttention-2"}
    for algorithm, name in names.items():
        _, output = flashsim(f"run --algo {algorithm} --n 1024 --batch 64 --heads 16 --counts-only --json")
        r = json.loads(output)
        assert f"| {name} | {r['hbm_bytes'] / 1e9:.2f} GB | {r['flops'] / 1e9:.1f} G |" in README


def test_the_simulator_speed_table_is_the_stored_run():
    run = json.loads((ROOT / "sim/lab/results/bench-sim.json").read_text())
    assert f"`flashsim bench sim --repeats {run['repeats']}`, median of {run['repeats']}" in README
    assert f"| plain NumPy standard attention (float32) | {run['numpy_seconds']:.3f} | 1.00 |" in README
    names = {"standard": "standard attention", "flash1": "FlashAttention (Algorithm 1)", "flash2": "FlashAttention-2"}
    for row in run["rows"]:
        assert f"| sim {names[row['algorithm']]} | {row['seconds']:.3f} | {row['ratio_to_numpy']:.2f} |" in README
    memory = run["memory"]
    mib = "{:.1f} MiB".format
    assert (
        f"took {memory['seconds']:.1f} s and raised the probe's peak resident memory from "
        f"{mib(memory['rss_before_run_bytes'] / 2**20)} to {mib(memory['peak_rss_bytes'] / 2**20)}"
    ) in squeeze(README)


def test_the_commands_table_is_the_stored_run():
    run = json.loads((ROOT / "sim/lab/results/bench-cli.json").read_text())
    for row in run["rows"]:
        t = row["seconds"]
        shown = f"{t * 1e3:.0f} ms" if t < 1 else f"{t:.1f} s"
        assert row["exit_code"] == 0
        assert f"| `{row['command']}` | {shown} | {row['peak_rss_bytes'] / 2**20:.1f} MiB |" in README, row["command"]
    assert all(row["seconds"] < 2 for row in run["rows"] if "--counts-only" in row["command"])  # as measured, stored


def test_an_elided_piece_of_a_line_matches_only_in_order():
    line = squeeze("max |dq − float64| │ 1.99e-07 │ within 0.00457")
    assert holds("max |dq − float64| │ …e-07 │ within 0.00457", line)
    assert not holds("within 0.00457 … max |dq − float64|", line)
    assert not holds("max |dq − float64| │ …e-08 │ within 0.00457", line)
