"""Issue 21's findings, one test each (items 3–13; 1 and 2 in test_tolerance.py and test_counts_only.py): no lost
file, no traceback, honest exit codes, strict JSON, refusals that can be typed back, any terminal."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim
from sim.algorithms.registry import REGISTRY
from sim.cli import app, estimate
from sim.core import atomic_file, strict_json
from sim.machine import iomodel
from tests.cli_runner import error_line, flashsim

ROOT = Path(__file__).resolve().parents[1]
GRADING = Path(__file__).parent / "grading_submissions"


def process(*args, env=None, **kwargs):
    """`python -m sim.cli ARGS` in a fresh process (what a shell runs)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "sim.cli", *map(str, args)], env=env, capture_output=True, **kwargs)


def strict(text: str):
    """JSON as a strict parser reads it: no NaN, Infinity or -Infinity literals."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))


# -- item 3: files -----------------------------------------------------------------------------------------


def test_a_full_device_is_one_line_and_exit_2():
    result = process("trace", "--n", 8, "--json", "/dev/full")
    assert result.returncode == 2 and result.stderr.decode() == "error: /dev/full: No space left on device\n"
    result = subprocess.run(f"{sys.executable} -m sim.cli run --n 64 --json > /dev/full", shell=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)  # fmt: skip
    assert result.returncode == 2 and result.stderr.decode().count("\n") == 1
    assert b"Traceback" not in result.stderr


def test_a_failed_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "trace.json"
    path.write_text("the old trace")

    def replace(src, dst):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", replace)
    line = error_line(flashsim("trace", "--n", 8, "--json", path, code=2))
    assert str(path) in line and "Input/output error" in line
    assert path.read_text() == "the old trace" and os.listdir(tmp_path) == ["trace.json"]  # no temporary left


def test_a_pipe_is_written_directly_not_replaced(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = {}
    reader = threading.Thread(target=lambda: got.update(text=fifo.read_text()))
    reader.start()
    flashsim("bench", "trace", "--n", 16, "--d", 4, "--dtype", "fp32", "--hardware", "toy", "--keys", 1, "--json", fifo)
    reader.join(30)
    assert fifo.is_fifo() and [r["algorithm"] for r in strict(got["text"])["trace_viewer"]] == list(REGISTRY)


def test_every_writer_goes_through_the_atomic_file():
    """No command module opens a file for writing but through sim.core.atomic_file."""
    writes = re.compile(r"open\([^)]*['\"]w|\.write_text\(|\.save_(svg|html)\(|savefig\(")
    for path in [
        *(ROOT / "sim" / "cli").glob("*.py"),
        ROOT / "sim" / "machine" / "trace.py",
        ROOT / "sim" / "viewer" / "export.py",
    ]:
        assert not writes.search(path.read_text()), path


# -- item 4: a crafted --load trace -------------------------------------------------------------------------


def crafted(tmp_path, **config) -> Path:
    small = tmp_path / "small.json"
    flashsim("trace", "--n", 8, "--json", small)
    d = json.loads(small.read_text())
    d["config"].update(config)
    for name, t in d["hbm"].items():
        t["shape"][0] = config.get("nk" if name in ("K", "V") else "n", t["shape"][0])
    path = tmp_path / "crafted.json"
    path.write_text(json.dumps(d))
    return path


def test_a_trace_claiming_a_billion_rows_opens_without_walking_them(tmp_path, monkeypatch):
    path = crafted(tmp_path, n=10**9, nk=10**9)
    monkeypatch.setattr(iomodel, "row_blocks", None)  # the closed form must not walk 10⁹ / Br row blocks
    assert "closed form" in flashsim("trace", "--load", path, "--step", 2).stdout


def test_a_trace_claiming_sizes_beyond_the_command_lines_is_refused(tmp_path):
    line = error_line(flashsim("trace", "--load", crafted(tmp_path, n=2**62, nk=2**62), code=2))
    assert line.startswith("error: --load: ") and "config n is 4611686018427387904" in line
    assert "from 1 to 9,007,199,254,740,992 (as the command line)" in line  # was "2**53", as no option says it


# -- item 5: signals ----------------------------------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="needs a POSIX pseudo-terminal")
@pytest.mark.parametrize("how, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_the_viewer_puts_the_terminal_back_on_a_signal(how, code):
    from tests.pty_terminal import Terminal

    terminal = Terminal("trace", "--n", "4", "--d", "4", "--block-rows", "2", "--block-cols", "2")
    try:
        terminal.after(b"", b"28 steps")
        terminal.proc.send_signal(how)  # SIGINT: what Ctrl-C sends (this pty is not the process's controlling one)
        assert terminal.proc.wait(timeout=20) == code
        rest = b""
        while True:
            try:
                chunk = os.read(terminal.master, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            rest += chunk
        assert b"\x1b[?1049l" in rest and b"\x1b[?25h" in rest  # the alternate screen left, the cursor shown
        assert b"Traceback" not in rest
    finally:
        terminal.close()


def test_a_closed_pipe_ends_quietly():
    result = subprocess.run(f"{sys.executable} -m sim.cli walkthrough | head -1", shell=True, capture_output=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, executable="/bin/bash")  # fmt: skip
    assert result.stderr == b"" and result.stdout.count(b"\n") == 1
    piped = subprocess.run(f"set -o pipefail; {sys.executable} -m sim.cli walkthrough | head -1 >/dev/null; echo $?",
                           shell=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           executable="/bin/bash")  # fmt: skip
    assert piped.stdout.strip() == b"0"


def test_exit_codes_are_documented():
    text = flashsim("--help").stdout
    for code in ("0 success", "1 a verdict or a grade that failed", "2 a usage or input error", "130 interrupted"):
        assert code in " ".join(text.split()), code


def test_a_grade_below_full_marks_exits_1():
    master = GRADING / "tiny" / "01_tiny_softmax.py"
    flashsim("grade", master, master, "--seed", 1, "--quiet")  # full marks: 0
    out = flashsim("grade", "02", GRADING / "02" / "fa2_loop_order.py", "--seed", 4, "--quiet", code=1)
    assert "70 / 100" in out.stdout


# -- item 6: terminals --------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_without_utf8_gets_the_report(encoding):
    result = process("run", "--n", 64, env={"PYTHONIOENCODING": encoding})
    assert result.returncode == 0 and b"Traceback" not in result.stderr and b"HBM bytes" in result.stdout


@pytest.mark.parametrize("columns", ["0", "-3", "abc", "1000000000"])
def test_a_columns_that_is_no_size_is_ignored(columns):
    result = process("run", "--n", 64, env={"COLUMNS": columns})
    assert result.returncode == 0 and b"HBM bytes" in result.stdout
    assert max(map(len, result.stdout.decode().splitlines())) <= 1000


@pytest.mark.parametrize("args", [("run", "--backward", "--counts-only"), ("decode",), ("paper", "fig2"),
                                  ("assignments", "list")])  # fmt: skip
def test_no_number_or_name_is_cut_at_80_columns(args):
    result = process(*args, env={"COLUMNS": "80"})
    assert result.returncode == 0 and "…" not in result.stdout.decode()


@pytest.mark.skipif(os.name != "posix", reason="needs a POSIX pseudo-terminal")
def test_a_small_terminal_says_what_to_do_and_a_resize_redraws():
    import fcntl
    import struct
    import termios

    from tests.pty_terminal import Terminal

    terminal = Terminal("trace", "--n", "4", "--d", "4", "--block-rows", "2", "--block-cols", "2", rows=15, columns=40)
    try:
        assert "this terminal is 40 × 15" in " ".join(terminal.after(b"", b"needs", end=b"less").split())
        fcntl.ioctl(terminal.master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        terminal.proc.send_signal(signal.SIGWINCH)
        assert "Algorithm 1" in terminal.after(b"", b"28 steps")
        assert terminal.quit() == 0
    finally:
        terminal.close()


# -- item 7: strict JSON ------------------------------------------------------------------------------------


def test_trace_json_is_strict_and_reads_back_its_infinities(tmp_path):
    text = flashsim("trace", "--n", 4, "--d", 4, "--json").stdout
    assert '"-Infinity"' in text  # m starts at −∞
    strict(text)
    path = tmp_path / "t.json"
    flashsim("trace", "--n", 4, "--d", 4, "--json", path)
    trace = sim.machine.trace.Trace.load(path)
    firsts = [s.values["after"]["m_i"] for s in trace.steps if s.values and "m_i" in s.values["after"]]
    assert firsts[0] == [float("-inf")] * len(firsts[0])


def test_the_encoder_writes_non_finite_numbers_as_strings():
    import numpy as np

    assert strict_json.dumps({"a": [float("inf"), -np.inf, np.float32("nan"), 1.5, np.int64(3)]}) == (
        '{"a": ["Infinity", "-Infinity", "NaN", 1.5, 3]}'
    )


# -- items 8, 9, 13: refusals -------------------------------------------------------------------------------


def suggested(result, option: str) -> str:
    return re.search(rf"{option} (\S+) or less", error_line(result)).group(1)


def test_the_suggested_n_is_typed_back_and_does_not_shrink_with_n(monkeypatch):
    values = {suggested(flashsim("trace", "--n", n, "--d", 16, code=2), "--n") for n in (10**5, 10**6, 10**8)}
    assert len(values) == 1 and values.pop().isdigit()

    def run(*args, **kwargs):
        raise RuntimeError("started")  # past the estimate: the suggestion was let through

    monkeypatch.setattr(sim.viewer.traces, "record", run)
    n = suggested(flashsim("trace", "--n", 10**6, "--d", 16, code=2), "--n")
    assert isinstance(flashsim("trace", "--n", n, "--d", 16, code=1).exception, RuntimeError)


def test_the_suggested_scale_is_accepted():
    line = error_line(flashsim("run", "--n", 64, "--scale", "1e36", code=2))
    most = re.search(r"≤ (\S+) for", line).group(1)
    flashsim("run", "--n", 64, "--scale", most, "--quiet")


@pytest.mark.parametrize("value", ["-5", "nan", "0", "soon"])
def test_a_malformed_time_limit_is_refused_by_name(value):
    line = error_line(flashsim("run", "--n", 64, code=2, env={"FLASHSIM_MAX_SECONDS": value}))
    assert "FLASHSIM_MAX_SECONDS" in line and repr(value) in line


def test_a_long_key_cache_is_refused_before_it_starts():
    line = error_line(flashsim("run", "--n", 64, "--nk", 10**7, code=2))
    assert line.startswith("error: --nk: ") and "try --counts-only" in line


def test_one_tile_pair_is_singular_and_only_given_options_are_blamed():
    assert estimate.tiles({"n": 4, "nk": 4, "block_rows": 4, "block_cols": 4}) == "1 tile pair of 4 × 4"
    line = error_line(flashsim("run", "--sram-bytes", 64, code=2))
    assert "--d" not in line.split(":")[1]


# -- item 12: help ------------------------------------------------------------------------------------------


def commands(group=app, path=()):
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


@pytest.mark.parametrize("path", [p for p, _ in commands()], ids=" ".join)
def test_help_says_what_every_option_is_in_words(path):
    text = flashsim(*path, "--help").stdout
    assert "9007199254740992" not in text and "<=" not in text and "v4" not in text
    command = dict(commands())[path]
    for param in command.params:
        if param.param_type_name == "option" and not param.hidden:
            assert param.help, (path, param.name)
    assert all(p.opts[0] != "--json" or p.metavar == "[FILE]" for p in command.params), "--json [FILE] everywhere"


def test_demo_train_states_its_real_minimum():
    assert "6 or more" in flashsim("demo", "train", "--help").stdout
    assert "not in the range 6 or more" in error_line(flashsim("demo", "train", "--steps", 5, code=2))


def test_atomic_target_removes_its_temporary_on_failure(tmp_path):
    path = tmp_path / "x"
    with pytest.raises(ValueError), atomic_file.target(path) as where:
        where.write_text("half")
        raise ValueError
    assert os.listdir(tmp_path) == []


def test_the_lazy_command_table_names_every_familys_commands():
    """`flashsim` imports a family's module only when one of its commands runs: the table must say its names."""
    import importlib

    from sim.cli import FAMILIES

    for module, names in FAMILIES.items():
        assert tuple(c.name for c in importlib.import_module(f"sim.cli.{module}").COMMANDS) == names, module
    assert sorted(app.commands) == sorted(n for names in FAMILIES.values() for n in names)
    assert re.fullmatch(r"flashsim \d+\.\d+\.\d+\n", flashsim("--version").stdout)


def small_trace(tmp_path) -> dict:
    small = tmp_path / "small.json"
    flashsim("trace", "--n", 4, "--d", 4, "--json", small)
    return json.loads(small.read_text())


NOT_A_NUMBER = st.one_of(st.none(), st.booleans(), st.text(max_size=4), st.just([]), st.just([[]]),
                         st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_trace_with_anything_but_numbers_where_values_go_is_refused_in_one_line(tmp_path, data):
    """A step's values, the inputs and the output are numbers: anything else in a --load file was a TypeError
    traceback from the listing (or from the viewer's first screen)."""
    d = small_trace(tmp_path)
    places = [(bufs, name) for s in d["steps"] for bufs in (s["values"] or {}).values() for name in bufs]
    places += [(d["inputs"], name) for name in d["inputs"]] + [(d, "output")]
    holder, name = data.draw(st.sampled_from(places))
    row, bad = holder, data.draw(NOT_A_NUMBER)  # one number of a scalar, vector or matrix becomes `bad`
    while isinstance(row[name], list) and row[name]:
        row, name = row[name], data.draw(st.integers(0, len(row[name]) - 1))
    row[name] = bad
    path = tmp_path / "crafted.json"
    path.write_text(json.dumps(d))
    for step in ([], ["--step", 3]):
        line = error_line(flashsim("trace", "--load", path, *step, code=2))
        assert line.startswith("error: --load: malformed trace: ") and "where a number goes" in line, line


def test_a_trace_nested_too_deep_or_larger_than_memory_holds_is_refused_in_one_line(tmp_path, monkeypatch):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert error_line(flashsim("trace", "--load", deep, code=2)).startswith("error: --load: ")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(small_trace(tmp_path)))
    monkeypatch.setattr(estimate, "available_memory", lambda: estimate.PROCESS + path.stat().st_size)
    line = error_line(flashsim("trace", "--load", path, code=2))  # what /dev/zero met: a file that never ends
    assert line.startswith("error: --load: ") and "free memory" in line, line


@pytest.mark.parametrize("where", ["phase", "sram name", "read level"])
def test_a_trace_whose_phase_buffer_name_or_tile_level_is_not_text_is_refused_in_one_line(tmp_path, where):
    """Found by fuzzing --load: a step's phase of 1 was a TypeError traceback from the listing's join."""
    d = small_trace(tmp_path)
    step = next(s for s in d["steps"] if s["reads"] and s["sram"])
    if where == "phase":
        step["phase"] = 1
    elif where == "sram name":
        step["sram"][0]["name"] = 5
    else:
        step["reads"][0]["level"] = []
    path = tmp_path / "crafted.json"
    path.write_text(json.dumps(d))
    for step in ([], ["--step", 3]):
        line = error_line(flashsim("trace", "--load", path, *step, code=2))
        assert line.startswith("error: --load: malformed trace: ") and "not text" in line, line
