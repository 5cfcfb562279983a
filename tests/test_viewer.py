"""`flashsim trace` and `flashsim walkthrough` as a user drives them, and the viewer's keys."""

import io
import json
import os
import re

import pytest
from pty_terminal import Terminal
from rich.console import Console

from sim.algorithms.registry import REGISTRY
from sim.lab import walkthrough
from sim.machine.trace import VERSION, Trace
from sim.viewer import keys, terminal, traces
from sim.viz import listing, screen
from sim.viz.timeline import Timeline
from tests.cli_runner import error_line, flashsim

WALK = ["--algo", "flash1", "--n", "4", "--d", "4", "--block-rows", "2", "--block-cols", "2"]


@pytest.fixture(scope="module")
def flash1():
    return Timeline(walkthrough.flash().trace)


# -- the keys ---------------------------------------------------------------------------------


def test_keys_move_through_steps_and_tiles(flash1):
    v = keys.Viewer(flash1)
    for key, k in [
        ("right", 1),
        ("n", 2),
        ("left", 1),
        ("home", 0),
        ("end", 27),
        ("right", 27),
        ("home", 0),
        ("left", 0),
    ]:
        assert v.press(key) and v.k == k, key
    v.press("t")  # steps 0, 1 are the inits of i = 0, 1; step 2 loads K_0, V_0; steps 3–8 are (i, j) = (0, 0)
    assert v.k == 1
    v.k = 4
    v.press("t")
    assert v.k == 9 and (flash1.steps[9].i, flash1.steps[9].j) == (1, 0)
    v.press("T")
    assert v.k == 3 and (flash1.steps[3].i, flash1.steps[3].j) == (0, 0)


def test_g_types_a_step_number(flash1):
    v = keys.Viewer(flash1)
    for key in "g12":
        v.press(key)
    assert v.footer.startswith("go to step: 12")
    v.press("backspace")
    v.press("9")
    v.press("enter")
    assert v.k == 19 and v.footer == screen.KEYS
    for key in ("g", "9", "9", "enter"):
        v.press(key)
    assert v.k == 19 and v.footer.startswith("no step 99: this trace has steps 0 … 27")
    v.press("g")
    v.press("escape")
    assert v.typed is None and v.k == 19
    assert v.press("q") is False


def test_read_key_names_escape_sequences():
    read, write = os.pipe()
    try:
        for raw, key in [
            (b"\x1b[C", "right"),
            (b"\x1b[D", "left"),
            (b"\x1b[H", "home"),
            (b"\x1b[4~", "end"),
            (b"\r", "enter"),
            (b"\x7f", "backspace"),
            (b"t", "t"),
        ]:
            os.write(write, raw)
            assert keys.read_key(read) == key
    finally:
        os.close(read)
        os.close(write)


def test_play_shows_every_step_then_leaves_the_last(flash1):
    out = io.StringIO()
    terminal.play(flash1, Console(file=out, width=120, height=40), delay=0)
    text = out.getvalue()
    assert [int(n) for n in re.findall(r"playing step (\d+) · 28 steps", text)] == list(range(28))
    last = text.rsplit("playing step 27 · 28 steps", 1)[1]
    assert "step 27 · 28 steps" in last and "Algorithm 1, line 13" in last


def test_play_goes_tile_pair_by_tile_pair_on_big_runs():
    big = Timeline(traces.record("flash2", *_inputs(256, 16), block_rows=16, block_cols=16, hardware="A100-40GB"))
    assert len(big) > listing.STEPS_LISTED
    shown = terminal.frames(big)
    assert shown == [last for _, last in big.tile_groups()] and len(shown) < len(big)


def _inputs(n, d):
    import numpy as np

    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal((n, d)).astype(np.float16) for _ in range(3))


# -- the command ------------------------------------------------------------------------------


def test_piped_trace_prints_the_plain_listing():
    result = flashsim("trace", *WALK)
    assert result.exit_code == 0
    out = result.output
    assert "\x1b" not in out
    assert [int(n) for n in re.findall(r"^step (\d+) · line", out, re.MULTILINE)] == list(range(28))
    assert "closed form" in out and out == flashsim("trace", *WALK).output


def test_step_prints_that_screen():
    result = flashsim("trace", *WALK, "--step", "6")
    assert result.exit_code == 0
    out = result.output
    assert "step 6 · 28 steps" in out and "Algorithm 1, line 11" in out
    trace = traces.record("flash1", *_walk_inputs(), block_rows=2, block_cols=2, hardware="toy")
    m_new = trace.steps[6].values["after"]["m_i_new"]
    assert f"{m_new[0]:.3f}" in out and f"{m_new[1]:.3f}" in out


def _walk_inputs():
    from sim.api.inputs import random_inputs

    return (x[0, 0] for x in random_inputs(1, 1, 4, 4, 4, "fp32", 0))


def test_json_round_trip_through_load(tmp_path):
    path = tmp_path / "run.json"
    wrote = flashsim("trace", *WALK, "--causal", "--json", str(path))
    assert wrote.exit_code == 0 and f"wrote {path}" in wrote.output
    saved = json.loads(path.read_text())
    assert saved["schema"] == "flashsim.trace" and saved["version"] == VERSION and len(saved["steps"]) == 28
    assert flashsim("trace", "--load", str(path)).output == flashsim("trace", *WALK, "--causal").output
    assert (
        flashsim("trace", "--load", str(path), "--step", "12").output
        == flashsim("trace", *WALK, "--causal", "--step", "12").output
    )


def test_load_with_row_cuts_the_values_to_that_row(tmp_path):
    path = tmp_path / "run.json"
    flashsim("trace", "--algo", "flash2", "--n", "8", "--block-rows", "4", "--block-cols", "4", "--json", str(path))
    out = flashsim("trace", "--load", str(path), "--row", "5", "--step", "18").output  # line 9 of (i, j) = (1, 0)
    full = Trace.load(path).steps[18]
    assert (full.line, full.i, full.j, full.rows) == (9, 1, 0, (4, 8)) and "Values · query row 5" in out
    assert f"{full.values['after']['ℓ_i'][1]:.3f}" in out


def test_svg_and_html_exports(tmp_path):
    svg, html = tmp_path / "step.svg", tmp_path / "run.html"
    result = flashsim("trace", *WALK, "--step", "7", "--svg", str(svg))
    assert result.exit_code == 0 and svg.read_text().startswith("<svg")
    assert "step 7 · 28 steps" in svg.read_text().replace("&#160;", " ")
    result = flashsim("trace", *WALK, "--html", str(html))
    page = html.read_text()
    assert result.exit_code == 0 and "<html" in page and "step 27" in page and "closed form" in page


def test_backward_pass_trace():
    out = flashsim(
        "trace", "--algo", "flash2", "--backward", "--n", "8", "--d", "4", "--block-rows", "4", "--block-cols", "4"
    ).output
    assert "flashsim trace flash2 backward" in out
    assert re.search(r"^step 0 · line \d+", out, re.MULTILINE)
    totals = re.search(r"total\s+([\d,]+) B\s+([\d,]+) B", out).groups()
    closed = re.search(r"closed form\s+([\d,]+) B\s+([\d,]+) B", out).groups()
    assert totals == closed


# -- bad input --------------------------------------------------------------------------------


def test_out_of_range_step():
    assert (
        error_line(flashsim("trace", *WALK, "--step", "28", code=2))
        == "error: --step: 28 is out of range; this trace has steps 0 … 27"
    )
    assert "--step: -1 is out of range" in error_line(flashsim("trace", *WALK, "--step", "-1", code=2))


def test_row_outside_the_matrix(tmp_path):
    assert "--row: 4 is outside the matrix; query rows are 0 … 3 (N = 4)" in error_line(
        flashsim("trace", *WALK, "--row", "4", code=2)
    )
    path = tmp_path / "run.json"
    flashsim("trace", *WALK, "--json", str(path))
    assert "--row: -2 is outside the matrix" in error_line(
        flashsim("trace", "--load", str(path), "--row", "-2", code=2)
    )


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "is not valid JSON"),
        (
            json.dumps({"schema": "flashsim.trace", "version": 99}),
            "--load: version 99 is not supported (this flashsim reads 1, 2 and 3)",
        ),
        (json.dumps({"schema": "something.else"}), "not a flashsim trace"),
        (json.dumps({"schema": "flashsim.trace", "version": 1, "steps": []}), "a field is missing"),
    ],
)
def test_bad_trace_files(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert message in error_line(flashsim("trace", "--load", str(path), code=2))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(steps=[]), "--load: it has no steps"),
        (lambda d: d["config"].update(dtype="fp8"), "--load: dtype 'fp8' is unknown; flashsim stores fp16, bf16, fp32"),
    ],
)
def test_traces_the_viewer_cannot_show_are_refused(tmp_path, edit, message):
    d = walkthrough.flash().trace.to_dict()
    edit(d)
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(d))
    assert error_line(flashsim("trace", "--load", str(path), code=2)) == f"error: {message}"


def test_conflicting_options():
    assert error_line(flashsim("trace", *WALK, "--step", "1", "--play", code=2)) == "error: --step, --play: choose one"
    assert "drop --n" in error_line(flashsim("trace", "--load", "x.json", "--n", "8", code=2))
    assert "drop --hardware" in error_line(flashsim("trace", "--load", "x.json", "--hardware", "toy", code=2))


# -- the walkthrough --------------------------------------------------------------------------


def test_walkthrough_listing_is_stable_and_fits_80_columns():
    first, again = flashsim("walkthrough"), flashsim("walkthrough")
    assert first.exit_code == 0 and first.output == again.output
    from rich.cells import cell_len

    lines = first.output.splitlines()
    assert "\x1b" not in first.output and max(cell_len(line) for line in lines) <= 80
    assert [int(n) for n in re.findall(r"^step (\d+) · line", first.output, re.MULTILINE)] == list(range(28))
    # the running max grows when the second K/V block arrives: m_i → m_i_new at line 11 of (i, j) = (1, 1)
    step = first.output.split("step 25 · line 11 · i=1 j=1")[1]
    assert re.search(r"m_i_new\s+\[0\.500\s+1\.000\]\s+→\s+\[1\.000\s+1\.500\]", step)


def test_walkthrough_json_is_unchanged():
    result = flashsim("walkthrough", "--json")
    assert Trace.from_dict(json.loads(result.output)) == walkthrough.flash().trace


def test_width_sets_the_columns_of_step_and_listing():
    from rich.cells import cell_len

    wide = flashsim("trace", *WALK, "--step", "3", "--width", "110").output.splitlines()
    assert cell_len(wide[0]) == 110 and "╮╭" in wide[1]  # two columns from 100 on
    narrow = flashsim("trace", *WALK, "--step", "3").output.splitlines()
    assert max(cell_len(line) for line in narrow) == 80 and "╮╭" not in narrow[1]


def test_bench_trace_counts_the_steps_it_opened(tmp_path):
    path = tmp_path / "bench.json"
    result = flashsim(
        "bench",
        "trace",
        "--n",
        "32",
        "--d",
        "4",
        "--dtype",
        "fp32",
        "--hardware",
        "toy",
        "--keys",
        "2",
        "--json",
        str(path),
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(path.read_text())["trace_viewer"]
    assert [r["algorithm"] for r in rows] == list(REGISTRY)  # one row per registered algorithm
    for r in rows:
        q, k, v = (x.astype("float32") for x in _inputs(32, 4))
        assert r["steps"] == len(traces.record(r["algorithm"], q, k, v, hardware="toy").steps)
        assert re.search(rf"{r['algorithm']}\s+│\s+{r['steps']:,}\s+│", result.output)


def test_without_termios_the_viewer_reads_one_command_per_line(flash1, monkeypatch):
    commands = iter(["", "t", "12", "p", "99", "q"])
    monkeypatch.setattr(terminal, "termios", None)
    monkeypatch.setattr("builtins.input", lambda prompt: next(commands))
    out = io.StringIO()
    terminal.interact(flash1, Console(file=out, width=120))
    shown = [int(n) for n in re.findall(r"step (\d+) · 28 steps", out.getvalue())]
    assert shown == [0, 1, 2, 12, 11, 11]  # enter, next tile, jump to 12, previous, no step 99 (stays), quit
    assert "no step 99: this trace has steps 0 … 27" in out.getvalue().split("step 11 · 28 steps")[-1]


@pytest.mark.skipif(os.name != "posix", reason="needs a POSIX pseudo-terminal")
def test_the_viewer_in_a_real_terminal():
    """`flashsim trace` on a pseudo-terminal: the first screen, → and t move, g jumps, q quits cleanly."""
    terminal = Terminal("trace", *WALK)
    try:
        assert "Algorithm 1, line 2" in terminal.after(b"", "step 0 · 28 steps".encode())
        assert "Algorithm 1, line 6" in terminal.after(b"\x1b[C\x1b[C", "step 2 · 28 steps".encode())  # → →
        assert "i = 0 (query rows 0:2) · j = 0" in terminal.after(b"t", "step 3 · 28 steps".encode())
        assert "Algorithm 1, line 13" in terminal.after(b"g27\r", "step 27 · 28 steps".encode())
        assert terminal.quit() == 0
    finally:
        terminal.close()
