"""The README's section "The command line", claim by claim, where no other test holds it: the exit codes it lists are
the ones `flashsim --help` lists, `FLASHSIM_MAX_SECONDS=inf` lifts the time limit, a `LINES` that is no size is
ignored, and `--load` reads a trace of every version (1 and 2 wrote −∞ as the non-JSON literal -Infinity). The
others: exit codes, closed pipe, files, refusals, terminals and units in tests/test_cli_round2.py, strict JSON there
and in tests/test_cli_fuzz.py."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

import sim
from sim.cli import app

ROOT = Path(__file__).resolve().parent.parent
SECTION = (ROOT / "README.md").read_text().split("## The command line", 1)[1].split("\n## ", 1)[0]


def test_the_exit_codes_are_the_ones_help_gives():
    help_text = " ".join(CliRunner().invoke(app, ["--help"]).stdout.split())
    readme = " ".join(SECTION.split())
    for code, meaning in (("0", "success"), ("1", "a verdict or a grade that failed"), ("2", "a usage or input error"),
                          ("130", "interrupted"), ("143", "SIGTERM"), ("129", "SIGHUP")):  # fmt: skip
        assert f"{code} {meaning}" in help_text, code
        assert re.search(rf"{code} (after )?{meaning}", readme), code


def test_an_infinite_time_limit_lets_slow_work_start(monkeypatch):
    def started(*args, **kwargs):
        raise RuntimeError("started")

    monkeypatch.setattr(sim, "run", started)
    refused = CliRunner().invoke(app, ["run", "--hardware", "toy"])  # about a minute of work: over 30 s
    assert refused.exit_code == 2 and "FLASHSIM_MAX_SECONDS" in refused.stderr
    lifted = CliRunner(env={"FLASHSIM_MAX_SECONDS": "inf"}).invoke(app, ["run", "--hardware", "toy"])
    assert isinstance(lifted.exception, RuntimeError) and "FLASHSIM_MAX_SECONDS" in SECTION and "`inf`" in SECTION


def test_a_lines_that_is_no_size_is_ignored():
    for lines in ("0", "-1", "abc"):
        result = subprocess.run([sys.executable, "-m", "sim.cli", "run", "--n", "64"], capture_output=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT), "LINES": lines})  # fmt: skip
        assert result.returncode == 0 and b"HBM bytes" in result.stdout and result.stderr == b"", lines


def test_load_reads_a_version_2_trace_with_its_infinity_literals(tmp_path):
    path = tmp_path / "v3.json"
    assert CliRunner().invoke(app, ["trace", "--n", "4", "--d", "4", "--json", str(path)]).exit_code == 0
    d = json.loads(path.read_text())
    d["version"] = 2
    old = tmp_path / "v2.json"
    old.write_text(json.dumps(d).replace('"-Infinity"', "-Infinity"))  # what version 2 wrote
    assert "-Infinity" in old.read_text() and '"-Infinity"' not in old.read_text()
    trace = sim.machine.trace.Trace.load(old)
    firsts = [s.values["after"]["m_i"] for s in trace.steps if s.values and "m_i" in s.values["after"]]
    assert firsts[0] == [float("-inf")] * len(firsts[0])
    result = CliRunner().invoke(app, ["trace", "--load", str(old), "--step", "3"])
    assert result.exit_code == 0 and "Algorithm 1" in result.stdout
