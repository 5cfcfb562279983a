"""The viewer's screens at 80 × 24 and 120 × 40, rendered headlessly: every panel shows what the trace holds.

No byte-for-byte snapshot: each assertion reads one panel's text and checks it against the trace, the listing's
source file and the closed form, so that a change of style does not break them but a lost panel does.
"""

import io
import os
import re

import numpy as np
import pytest
from pty_terminal import Terminal
from rich.cells import cell_len
from rich.console import Console

from sim.core.dtypes import DTYPES
from sim.lab import walkthrough
from sim.machine import iomodel
from sim.machine.source import PACKAGE as PACKAGE_DIR
from sim.viewer import traces
from sim.viz import screen
from sim.viz.timeline import Timeline

SIZES = [(80, 24), (120, 40)]


def draw(view: Timeline, k: int, width: int, height: int) -> list[str]:
    console = Console(width=width, height=height, file=io.StringIO(), color_system=None, force_terminal=False)
    console.print(screen.screen(view, k, screen.KEYS, height=height))
    return console.file.getvalue().splitlines()


def columns(line: str) -> list[str]:
    """A screen line cut where the left panel's right border meets the right panel's left border."""
    both = re.match(r"^([│╭╰].*?[│╮╯])([│╭╰].*)$", line)
    return [both.group(1), both.group(2)] if both else [line]


def panel(lines: list[str], title: str) -> list[str]:
    """The lines inside the panel whose top border carries `title` (either column), borders stripped."""
    for row, line in enumerate(lines):
        for column, part in enumerate(columns(line)):
            if not part.startswith("╭─ " + title):
                continue
            inside = []
            for below in lines[row + 1 :]:
                cell = columns(below)[column]
                if cell.startswith("╰"):
                    return inside
                inside.append(cell[1:-1].strip())
    raise AssertionError(f"no panel {title!r} in\n" + "\n".join(lines))


def numbers(text: str) -> list[float]:
    return [float("-inf") if x == "−∞" else float(x) for x in re.findall(r"−∞|-?\d+\.\d+", text)]


def exact(n: int) -> str:
    return f"{n:,} B"


@pytest.fixture(scope="module")
def walk():
    return Timeline(walkthrough.flash().trace)


@pytest.fixture(scope="module")
def big():
    """A flash2 run too big to record every value: the viewer keeps query row 0's."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((64, 16)).astype(np.float32) for _ in range(3))
    return Timeline(traces.record("flash2", q, k, v, hardware="toy"))


@pytest.fixture(scope="module")
def backward():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((16, 4)).astype(np.float16) for _ in range(3))
    return Timeline(traces.record_backward("flash2", q, k, v, hardware="toy"))


def check_every_panel(view: Timeline, k: int, width: int, height: int) -> dict[str, list[str]]:
    """Assert what every panel must show at step k; return the panels' lines for more checks."""
    lines = draw(view, k, width, height)
    assert len(lines) == height and all(cell_len(line) <= width for line in lines)
    assert f"step {k} · {len(view)} steps" in lines[0] and "q quit" in lines[-1]
    step = view.steps[k]
    shown = {t: panel(lines, t) for t in ("Memory hierarchy", "Operation", "Values", "Traffic")}

    memory = " ".join(shown["Memory hierarchy"])
    for tensor in view.tensors:  # every HBM tensor's grid, one line each
        assert any(line.startswith(f"{tensor} ") for line in shown["Memory hierarchy"]), tensor
    for meaning in ("in SRAM", "just read", "just written", "HBM only"):
        assert meaning in memory
    assert "█ " in memory and f"▒ peak so far {exact(view.peak(k))}" in memory  # the bar's glyphs, explained
    assert f"{exact(step.sram_bytes)} of {exact(view.sram_capacity)}" in memory
    residents = re.sub(r"\s+", " ", memory)
    for r in step.sram:
        assert f"{r.name} {exact(r.nbytes)}" in residents or re.search(
            rf"{re.escape(r.name)} +{exact(r.nbytes)}", memory
        )

    operation = " ".join(shown["Operation"])
    assert f"line {step.line}" in operation and f"i = {step.i}" in operation
    file, number = step.code
    assert f"{file}:{number}" in operation
    source = (PACKAGE_DIR / file).read_text().splitlines()
    code = [line for line in shown["Operation"] if re.match(r"(▶ )?\d+ ", line)]
    assert code, "no line of the listing's code"
    for line in code:
        n, text = re.match(r"(?:▶ )?(\d+) (.*)", line).groups()
        whole, shown_text = source[int(n) - 1].strip(), text.strip()
        assert shown_text == whole or (  # a line cut by the panel says so with …
            shown_text.endswith("…") and whole.startswith(shown_text.removesuffix("…").strip())
        ), (whole, shown_text)

    traffic = shown["Traffic"]
    closed = view.closed_form()
    label, other = view.contrast()
    for name, read, written in (
        ("total", step.hbm_read_bytes, step.hbm_write_bytes),
        ("closed form", closed.hbm_read_bytes, closed.hbm_write_bytes),
        (label.split()[0], other.hbm_read_bytes, other.hbm_write_bytes),
    ):
        row = next(line for line in traffic if line.startswith(name))
        assert re.search(rf"{re.escape(exact(read))}\s+{re.escape(exact(written))}", row), (name, row)
    return shown


@pytest.mark.parametrize("width,height", SIZES)
@pytest.mark.parametrize("line,i,j", [(8, 1, 1), (11, 1, 1), (12, 0, 1), (12, 1, 1)])
def test_the_walkthrough_at_every_kind_of_step(walk, width, height, line, i, j):
    k = next(k for k, s in enumerate(walk.steps) if (s.line, s.i, s.j) == (line, i, j))
    shown = check_every_panel(walk, k, width, height)
    values = shown["Values"]
    after = walk.steps[k].values["after"]
    assert after, "the walkthrough's steps all change some value"
    assert not any(line.startswith("→") for line in values)  # before → after never wraps into a bare arrow
    text = " ".join(values)
    for name, value in after.items():  # each buffer's numbers, or its name among those a short screen leaves out
        if f"and {name}" in text or re.search(rf"and .*\b{re.escape(name)}\b", text):
            continue
        at = next(n for n, line in enumerate(values) if line.startswith(name + " "))
        shown_numbers = numbers(" ".join(values[at : at + 6]))
        flat = np.ravel(value).tolist()
        assert all(any(abs(x - y) < 5e-4 for y in shown_numbers) for x in flat[:2]), (name, values)


@pytest.mark.parametrize("width,height", SIZES)
def test_o_i_before_and_after_are_labelled_when_they_cannot_stand_side_by_side(walk, width, height):
    k = next(k for k, s in enumerate(walk.steps) if (s.line, s.i, s.j) == (12, 0, 1))
    values = check_every_panel(walk, k, width, height)["Values"]
    before, after = walk.value("O_i", k - 1), walk.steps[k].values["after"]["O_i"]
    if width == 80:  # too narrow for both side by side: labelled, one above the other
        assert values[0].split()[:2] == ["O_i", "before"] and values[2].split()[0] == "after"
        assert numbers(values[0]) == pytest.approx(before[0], abs=5e-4)
        assert numbers(values[2]) == pytest.approx(after[0], abs=5e-4)
    else:
        assert "→" in values[0] and numbers(values[0]) == pytest.approx(before[0] + after[0], abs=5e-4)


@pytest.mark.parametrize("width,height", SIZES)
def test_a_big_run_shows_query_row_0_values_by_default(big, width, height):
    assert big.trace.row == 0
    k = next(k for k, s in enumerate(big.steps) if s.line == 9 and s.values and s.values["after"])
    shown = check_every_panel(big, k, width, height)
    assert any("Values · query row 0" in line for line in draw(big, k, width, height))
    values, after = shown["Values"], big.steps[k].values["after"]
    for name in ("m_i", "ℓ_i"):  # row 0's running max and sum: one number each, before → after
        row = next(line for line in values if line.startswith(name + " "))
        assert numbers(row)[-1] == pytest.approx(after[name], abs=5e-4)


@pytest.mark.parametrize("width,height", SIZES)
def test_a_backward_trace(backward, width, height):
    k = next(k for k, s in enumerate(backward.steps) if s.values and s.values["after"] and s.j == 0 and s.i == 1)
    check_every_panel(backward, k, width, height)


def test_the_full_screen_shows_every_tensor_row_of_the_traffic(walk):
    """Printed whole (--step, exports): every tensor's row of the traffic table, and the listing around the step."""
    console = Console(width=120, file=io.StringIO(), color_system=None)
    k = next(k for k, s in enumerate(walk.steps) if (s.line, s.i, s.j) == (12, 0, 1))
    console.print(screen.screen(walk, k))
    lines = console.file.getvalue().splitlines()
    traffic = panel(lines, "Traffic")
    for tensor, (read, written, _) in walk.traffic(k).items():
        assert any(re.match(rf"{re.escape(tensor)}\s+{re.escape(exact(read))}\s+{re.escape(exact(written))}", line)
                   for line in traffic)  # fmt: skip
    assert any(line.startswith("▶ ") for line in panel(lines, "Operation"))  # the chip.step call, marked


def test_fp16_traffic_and_the_closed_form_agree_with_iomodel(big):
    c = iomodel.flash2(64, 64, 16, DTYPES["fp32"].itemsize, big.block_rows, big.block_cols)
    assert (big.closed_form().hbm_read_bytes, big.closed_form().hbm_write_bytes) == (
        c.hbm_read_bytes,
        c.hbm_write_bytes,
    )


@pytest.mark.skipif(os.name != "posix", reason="needs a POSIX pseudo-terminal")
def test_the_walkthrough_opens_on_its_inputs_in_the_viewer():
    """In a terminal, `flashsim walkthrough` first shows what the example is (Q, K, V; V is the identity)."""
    terminal = Terminal("walkthrough", rows=24, columns=80)
    try:
        intro = terminal.after(b"", b"FlashAttention, Algorithm 1, on N = 4", end=b"any key")
        assert "V is the identity" in intro and "Q" in intro and "[1  0  1  0]" in intro
        assert "Algorithm 1, line 2" in terminal.after(b" ", "step 0 · 28 steps".encode())
        assert terminal.quit() == 0
    finally:
        terminal.close()


def test_the_progress_bar_shows_the_bytes_moved_against_the_closed_form(monkeypatch):
    """Drawn (a terminal, no --quiet): the pass's share of its closed-form bytes; quiet or piped: nothing at all."""
    import sys

    import sim
    from sim.cli.progress import Work

    q = np.random.default_rng(0).standard_normal((2, 512, 16)).astype(np.float16)
    total = 2 * iomodel.flash2(512, 512, 16, 2, 128, 128).hbm_bytes
    for tty, quiet, drawn in ((True, False, True), (True, True, False), (False, False, False)):
        monkeypatch.setattr(sys.stdout, "isatty", lambda tty=tty: tty, raising=False)
        out = io.StringIO()
        with Work(quiet, Console(file=out, width=100, force_terminal=True, color_system=None)) as work:
            with work.simulating("flash2 forward", total):
                r = sim.run("flash2", q[None], q[None], q[None], block_rows=128, block_cols=128)
                if work.shown:
                    work.draw()  # what the bar's thread draws every tenth of a second after the first two
        assert r.hbm_bytes == total
        assert ("flash2 forward" in out.getvalue() and "100%" in out.getvalue()) == drawn, out.getvalue()


@pytest.mark.parametrize("width", range(60, 161, 4))
def test_the_header_shows_the_run_s_parts_whole_and_says_where_some_are_left_out(big, width):
    """Red team 96: at 80 columns the header read `fp32 · S… step 5`: a number cut; now whole parts, then `· …`."""
    full = draw(big, 3, 400, 40)[0].split(" step 3 · ")[0].removeprefix("flashsim trace ").rstrip().split(" · ")
    line = draw(big, 3, width, 40)[0]
    assert cell_len(line) <= width and line.rstrip().endswith(f"step 3 · {len(big)} steps")
    shown = line.split(" step 3 · ")[0].removeprefix("flashsim trace ").rstrip().split(" · ")
    if shown[-1] == "…":
        shown = shown[:-1]
    else:
        assert shown == full
    assert shown == full[: len(shown)] and len(shown) >= (2 if width >= 72 else 1)  # whole, in order; the shape at 72


@pytest.mark.parametrize("width", range(16, 60, 3))
def test_a_narrow_header_shortens_which_step_it_is_but_never_cuts_a_number(big, width):
    """Red team 99: at 20 columns it read `… step 649 · 650 st…`."""
    k = len(big) - 1
    head = screen.header(big, k)
    console = Console(width=width, file=io.StringIO(), color_system=None, force_terminal=False)
    console.print(head)
    line = console.file.getvalue().splitlines()[0].rstrip()
    assert cell_len(line) <= width
    assert line.endswith((f" step {k} · {len(big)} steps", f" step {k}/{len(big)}", f" {k}/{len(big)}")), line
