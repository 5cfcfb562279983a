"""The trace viewer's panels, rendered headlessly at a fixed width, against what the simulator's trace holds."""

import io
import re

import numpy as np
import pytest
from rich.cells import cell_len
from rich.console import Console

import sim
from sim.algorithms import registry
from sim.lab import walkthrough
from sim.machine import iomodel
from sim.viz import listing, panels, screen
from sim.viz import values as values_view
from sim.viz.timeline import Timeline

WIDTH = 60


def render(renderable, width: int = WIDTH, styles: bool = False) -> str:
    console = Console(width=width, record=True, color_system="truecolor", force_terminal=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text(styles=styles)


def inner(text: str) -> list[str]:
    """The lines inside a panel's border."""
    return [line[2:-2].rstrip() for line in text.splitlines()[1:-1]]


@pytest.fixture(scope="module")
def flash1():
    """The N = 4, block = 2 walkthrough: FlashAttention's Algorithm 1 with every value recorded."""
    return Timeline(walkthrough.flash().trace)


def expected_tiles(step, tensor: str, block: int, tiles: int) -> str:
    """The glyphs a row-blocked tensor should show, worked out from the step's reads, writes and residents."""
    states = [0] * tiles
    marks = (
        [(r.source, 1) for r in step.sram if r.source] + [(a, 2) for a in step.reads] + [(a, 3) for a in step.writes]
    )
    for a, state in marks:
        if a.tensor == tensor:
            for t in range(a.r0 // block, (a.r1 - 1) // block + 1):
                states[t] = max(states[t], state)
    return " ".join("·■RW"[s] for s in states)


def hbm_row(text: str, tensor: str) -> str:
    """The glyphs after a tensor's name and shape in the memory panel."""
    for line in inner(text):
        m = re.match(rf"^{re.escape(tensor)} +[0-9×]+ +([·■RW ]+)$", line)
        if m:
            return m.group(1).strip()
    raise AssertionError(f"no row for {tensor} in\n{text}")


def test_hbm_tiles_match_the_trace_at_every_step(flash1):
    for k, step in enumerate(flash1.steps):
        text = render(panels.memory_panel(flash1, k, WIDTH))
        for tensor in ("Q", "K", "V", "O", "ℓ", "m"):
            assert hbm_row(text, tensor) == expected_tiles(step, tensor, 2, 2), (k, tensor)


def test_hbm_tiles_at_known_steps(flash1):
    """Spelled out by hand from Algorithm 1, so that the oracle above cannot share a mistake with the code."""

    def rows(k):
        return {t: hbm_row(render(panels.memory_panel(flash1, k, WIDTH)), t) for t in "QKVO"}

    assert rows(3) == {"Q": "R ·", "K": "■ ·", "V": "■ ·", "O": "R ·"}  # line 8, i=0 j=0: load Q_0, O_0 (and ℓ_0, m_0)
    assert rows(7) == {"Q": "■ ·", "K": "■ ·", "V": "■ ·", "O": "W ·"}  # line 12: write O_0
    assert rows(9) == {"Q": "· R", "K": "■ ·", "V": "■ ·", "O": "· R"}  # line 8, i=1 j=0
    assert rows(15) == {"Q": "· ·", "K": "· R", "V": "· R", "O": "· ·"}  # line 6, j=1: load K_1, V_1


def test_resident_tiles_are_highlighted(flash1):
    ansi = render(panels.memory_panel(flash1, 7, WIDTH), styles=True)
    green, magenta = "\x1b[1;32m■", "\x1b[1;37;45mW"
    assert ansi.count(green) == 5 + 1  # Q_0, K_0, V_0, ℓ_0, m_0 (O_0 is being written), and the legend's
    assert ansi.count(magenta) == 1 + 1  # O_0, and the legend's


def test_sram_occupancy_and_residents_match_the_trace(flash1):
    peak = 0
    for k, step in enumerate(flash1.steps):
        peak = max(peak, step.sram_bytes)
        lines = inner(render(panels.memory_panel(flash1, k, WIDTH)))
        at = lines.index("SRAM")
        bar, numbers = lines[at + 1], lines[at + 2]
        used = int(re.match(r"█ ([\d,]+) B of", numbers).group(1).replace(",", ""))  # █: what is in use
        capacity = int(re.search(r"of ([\d,]+) B", numbers).group(1).replace(",", ""))
        shown_peak = int(re.search(r"peak so far ([\d,]+) B", numbers).group(1).replace(",", ""))
        assert (used, capacity, shown_peak) == (step.sram_bytes, 1024, peak)
        full, total = bar.count("█"), len(bar.strip())
        assert full == round(total * used / capacity) and full + bar.count("▒") == round(total * peak / capacity)
        residents = [line.split() for line in lines[at + 3 :] if line.strip()]
        assert [(r[0], int(r[1])) for r in residents] == [(r.name, r.nbytes) for r in step.sram] or step.sram == []


def test_resident_origin_names_the_hbm_tile(flash1):
    lines = inner(render(panels.memory_panel(flash1, 9, WIDTH)))
    assert "Q_i 32 B ← Q[2:4]" in [" ".join(line.split()) for line in lines]
    assert "S_ij 16 B on chip" not in lines  # S_ij is not resident at the load step


def test_operation_panel_names_the_papers_line_and_tile(flash1):
    text = " ".join(" ".join(inner(render(panels.operation_panel(flash1, 12, 100), 100))).split())
    step = flash1.steps[12]
    assert (step.line, step.i, step.j) == (11, 1, 0)
    assert text.startswith("Algorithm 1, line 11: On chip, m_i_new = max(m_i, m̃_ij)")
    assert "i = 1 (query rows 2:4) · j = 0 (key rows 0:2)" in text
    loads = " ".join(" ".join(inner(render(panels.operation_panel(flash1, 15, 100), 100))).split())
    assert "HBM → SRAM K[2:4] 32 B, V[2:4] 32 B" in loads


def numbers(text: str) -> list[float]:
    return [float("-inf") if x == "−∞" else float(x) for x in re.findall(r"−∞|-?\d+\.\d+", text)]


def value_row(text: str, name: str) -> str:
    lines = inner(text)
    for line in lines:
        if line.startswith(name + " "):
            return line[len(name) :]
    raise AssertionError(f"no {name} in\n{text}")


def test_running_statistics_before_and_after(flash1):
    """Line 11 of (i=1, j=1): m and ℓ before → after, the rescale factor, then the new O_i at line 12."""
    k = next(k for k, s in enumerate(flash1.steps) if (s.line, s.i, s.j) == (11, 1, 1))
    values = flash1.steps[k].values["after"]
    loaded = next(s for s in flash1.steps if (s.line, s.i, s.j) == (8, 1, 1)).values["after"]
    text = render(values_view.values_panel(flash1, k, 80), 80)
    assert numbers(value_row(text, "m_i_new")) == pytest.approx(loaded["m_i"] + values["m_i_new"], abs=5e-4)
    assert numbers(value_row(text, "ℓ_i_new")) == pytest.approx(loaded["ℓ_i"] + values["ℓ_i_new"], abs=5e-4)
    assert numbers(value_row(text, "α_i")) == pytest.approx(values["α_i"], abs=5e-4)
    assert values["m_i_new"] == [1.0, 1.5] and loaded["m_i"] == [0.5, 1.0]  # the max grew: α = e^(−0.5) < 1
    store = render(values_view.values_panel(flash1, k + 1, 80), 80)
    o_before, o_after = loaded["O_i"], flash1.steps[k + 1].values["after"]["O_i"]
    first, second = inner(store)[0], inner(store)[1]
    assert numbers(first) == pytest.approx(o_before[0] + o_after[0], abs=5e-4)
    assert numbers(second) == pytest.approx(o_before[1] + o_after[1], abs=5e-4)


def test_one_row_values_panel_on_a_bigger_run():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((64, 8)).astype(np.float32) for _ in range(3))
    trace = sim.run("flash2", q, k, v, block_rows=16, block_cols=16, record="values", row=37).trace
    view = Timeline(trace)
    steps = [n for n, s in enumerate(trace.steps) if s.line == 9 and s.values]  # the (m, ℓ) update of rows 32–47
    assert len(steps) == 4
    for n in steps:
        text = render(values_view.values_panel(view, n, 90), 90)
        assert "Values · query row 37" in text
        before, after = trace.steps[n].values["before"], trace.steps[n].values["after"]
        assert numbers(value_row(text, "m_i")) == pytest.approx([before["m_i"], after["m_i"]], abs=5e-4)
        assert numbers(value_row(text, "ℓ_i")) == pytest.approx([before["ℓ_i"], after["ℓ_i"]], abs=5e-4)
        assert numbers(value_row(text, "α_i")) == pytest.approx([after["α_i"]], abs=5e-4)
    score = render(values_view.values_panel(view, steps[0] - 1, 90), 90)  # line 8: S_ij, 16 numbers, those that fit
    shown = numbers(value_row(score, "S_ij"))
    assert 4 <= len(shown) < 16 and "…" in score
    assert shown == pytest.approx(trace.steps[steps[0] - 1].values["after"]["S_ij"][: len(shown)], abs=5e-4)
    elsewhere = render(values_view.values_panel(view, 1, 90), 90)  # a step on rows 0–15
    assert "Row 37 is not in this step's tile" in elsewhere


def traffic_rows(text: str) -> dict[str, tuple[int, ...]]:
    """{row label: (read, written[, L2 re-read])} from the traffic table."""
    rows = {}
    for line in inner(text):
        m = re.match(r"^\s*(\S.*?)((?:\s+[\d,]+ B){2,3})$", line)
        if m:
            rows[m.group(1)] = tuple(int(x.replace(",", "")) for x in re.findall(r"([\d,]+) B", m.group(2)))
    return rows


@pytest.mark.parametrize("algorithm", ["standard", "flash1", "flash2"])
def test_traffic_so_far_per_tensor_and_the_closed_forms(algorithm):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((6, 4)).astype(np.float16) for _ in range(3))
    trace = sim.run(algorithm, q, k, v, block_rows=2, block_cols=4, causal=True, hardware="toy", record="steps").trace
    view = Timeline(trace)
    closed, standard = registry.counts(algorithm, 6, 6, 4, 2, 2, 4, True), iomodel.standard(6, 6, 4, 2, True)
    for n in (0, len(trace.steps) // 2, len(trace.steps) - 1):
        rows = traffic_rows(render(panels.traffic_panel(view, n, 80), 80))
        for tensor in trace.hbm:
            done = trace.steps[: n + 1]
            read = sum(a.nbytes for s in done for a in s.reads if a.tensor == tensor and a.level == "hbm")
            cached = sum(a.nbytes for s in done for a in s.reads if a.tensor == tensor and a.level == "l2")
            written = sum(a.nbytes for s in done for a in s.writes if a.tensor == tensor)
            if read or written or tensor in rows:
                assert rows[tensor] == (read, written) + ((cached,) if algorithm == "standard" else ()), (n, tensor)
        assert rows["total"] == (trace.steps[n].hbm_read_bytes, trace.steps[n].hbm_write_bytes)
        assert rows["closed form"] == (closed.hbm_read_bytes, closed.hbm_write_bytes)
        other = "FlashAttention-2" if algorithm == "standard" else "standard attention"
        contrast = iomodel.flash2(6, 6, 4, 2, 2, 4, True) if algorithm == "standard" else standard
        assert rows[other] == (contrast.hbm_read_bytes, contrast.hbm_write_bytes)
    assert rows["total"] == rows["closed form"]  # the run ends where the closed form says


def test_big_grids_merge_tiles_and_keep_the_marks():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((512, 8)).astype(np.float16) for _ in range(3))
    trace = sim.run("flash2", q, k, v, block_rows=8, block_cols=8, hardware="toy", record="steps").trace  # 64 tiles
    view = Timeline(trace)
    n = next(n for n, s in enumerate(trace.steps) if (s.line, s.i, s.j) == (7, 20, 45))
    text = render(panels.memory_panel(view, n, WIDTH))
    note = re.search(r"a cell is (\d+) row blocks \(([^)]*)\)", " ".join(inner(text)))
    merged = int(note.group(1))
    assert merged > 1 and note.group(2) == "Q, K, V, O, L" and len(hbm_row(text, "K").split()) == -(-64 // merged)
    assert hbm_row(text, "K").split().index("R") == 45 // merged
    assert hbm_row(text, "Q").split().index("■") == 20 // merged


def test_screen_lays_out_all_four_panels(flash1):
    for width in (80, 120):
        text = render(screen.screen(flash1, 5, screen.KEYS), width)
        lines = text.splitlines()
        assert all(cell_len(line) <= width for line in lines)
        assert lines[0].rstrip().endswith("step 5 · 28 steps")
        for title in ("Memory hierarchy", "Operation · FlashAttention", "Values", "Traffic"):
            assert title in text
        assert lines[-1].rstrip() == screen.KEYS
    terminal = render(screen.screen(flash1, 5, screen.KEYS, height=30), 120)
    assert len(terminal.splitlines()) == 30


def test_plain_listing_of_a_big_run_has_one_line_per_tile_pair():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((256, 16)).astype(np.float16) for _ in range(3))
    trace = sim.run("flash1", q, k, v, block_rows=32, block_cols=32, hardware="A100-40GB", record="steps").trace
    view = Timeline(trace)
    assert len(view) > listing.STEPS_LISTED
    text = render(listing.listing(view), 80)
    table = [line for line in text.splitlines() if re.match(r"^\d+(–\d+)?  ", line)]
    assert len(table) == len(view.tile_groups()) == 8 + 8 + 8 * 8  # init per i, K/V load per j, (i, j) pairs
    for line, (first, last) in zip(table, view.tile_groups(), strict=True):
        group = trace.steps[first : last + 1]
        read = sum(a.nbytes for s in group for a in s.reads)
        assert line.startswith(str(first) if first == last else f"{first}–{last}")
        assert bool(re.search(rf"(?<![\d,]){read:,} B", line)) == bool(read)
    assert all(cell_len(line) <= 80 for line in text.splitlines())


def test_wide_before_and_after_stack_with_every_number():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((16, 4)).astype(np.float32) for _ in range(3))
    trace = sim.run("flash2", q, k, v, block_rows=8, block_cols=8, hardware="toy", record="values").trace
    n = next(n for n, s in enumerate(trace.steps) if (s.line, s.i, s.j) == (9, 1, 1))
    lines = inner(render(values_view.values_panel(Timeline(trace), n, 80), 80))
    at = next(i for i, line in enumerate(lines) if line.startswith("ℓ_i "))
    before, after = trace.steps[n].values["before"]["ℓ_i"], trace.steps[n].values["after"]["ℓ_i"]
    assert lines[at].split()[1] == "before" and numbers(lines[at]) == pytest.approx(before, abs=5e-4)
    assert lines[at + 1].split()[0] == "after" and numbers(lines[at + 1]) == pytest.approx(after, abs=5e-4)


@pytest.mark.parametrize("algorithm", ["standard", "flash1", "flash2"])
@pytest.mark.parametrize("backward", [False, True])
def test_every_step_of_ragged_causal_runs_renders(algorithm, backward):
    """N ≠ Nk, ragged blocks, a causal mask (rows that see no key), forward and backward: the screens draw."""
    from sim.viewer import traces

    rng = np.random.default_rng(1)
    q = rng.standard_normal((10, 3)).astype(np.float16)
    k, v = (rng.standard_normal((6, 3)).astype(np.float16) for _ in range(2))
    record = traces.record_backward if backward else traces.record
    view = Timeline(record(algorithm, q, k, v, causal=True, block_rows=4, block_cols=4, hardware="toy"))
    closed = view.closed_form()
    last = view.steps[-1]
    assert (last.hbm_read_bytes, last.hbm_write_bytes) == (closed.hbm_read_bytes, closed.hbm_write_bytes)
    for n in sorted({*range(0, len(view), max(1, len(view) // 12)), len(view) - 1}):  # a dozen, spread out
        text = render(screen.screen(view, n), 100)
        assert f"step {n} · {len(view)} steps" in text.splitlines()[0]
    assert "closed form" in render(listing.listing(view), 80)


def test_plain_listing_names_each_kernel_of_standard_attention():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((256, 16)).astype(np.float16) for _ in range(3))
    trace = sim.run("standard", q, k, v, block_rows=32, block_cols=32, hardware="A100-40GB", record="steps").trace
    text = render(listing.listing(Timeline(trace)), 80)
    kernels = [line for line in text.splitlines() if line.startswith("kernel ")]
    assert kernels == ["kernel S = τQKᵀ", "kernel P = softmax(S)", "kernel O = PV"]
    assert [s.phase for s in trace.steps[:1]] == ["S = τQKᵀ"] and trace.steps[-1].phase == "O = PV"


def test_the_listing_shows_at_most_64_rows_and_columns_of_a_matrix():
    """Red team 92: a loaded trace's 1000 × 1000 value matrix took 50 s and 8 MB to list in full."""
    from sim.viz import steps as step_text

    text = step_text.array([[float(r * 100 + c) for c in range(100)] for r in range(70)])
    lines = text.splitlines()
    assert len(lines) == 65 and lines[-1] == "… 6 more rows of 70, 36 more columns of 100"
    cells = lines[0].strip("[]").split()
    assert (
        len(cells) == 64
        and float(cells[-1].replace(",", "")) == 63.0
        and float(lines[63].strip("[]").split()[0].replace(",", "")) == 6300.0
    )
    assert step_text.array([1.0, 2.0]) == "[1.000  2.000]"
