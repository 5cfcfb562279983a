"""`flashsim run`, `trace` and `decode` with the LLM variants, checked against the closed forms computed here."""

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.algorithms import iomodel_variants as iv
from sim.cli import app
from sim.machine import iomodel, mask
from sim.machine.trace import Trace
from sim.viz.timeline import Timeline
from tests.cli_runner import error_line, flashsim


def test_gqa_window_run_equals_both_closed_forms():
    out = json.loads(flashsim("run", "--n", 96, "--d", 16, "--heads", 4, "--kv-heads", 2, "--window", "20,0",
                              "--block-rows", 16, "--block-cols", 16, "--json").stdout)  # fmt: skip
    per_head = iv.gqa("flash2", 1, 4, 2, 96, 96, 16, 2, 16, 16, window=(20, 0))
    packed = iv.gqa("flash2", 1, 4, 2, 96, 96, 16, 2, 16, 16, window=(20, 0), pack_gqa=True)
    assert out["hbm_bytes"] == out["closed_form"]["per_head"]["hbm_bytes"] == per_head.hbm_bytes
    assert out["closed_form"]["packed"]["hbm_bytes"] == packed.hbm_bytes
    assert out["skipped_tiles"] == 4 * iv.skipped_tiles(96, 96, 16, 16, window=(20, 0))
    assert out["tolerance"]["within"] is True


def test_seqlens_show_packed_against_padded():
    out = json.loads(flashsim("run", "--seqlens", "30,100,7", "--d", 16, "--heads", 2, "--causal", "--alibi",
                              "--block-rows", 16, "--block-cols", 16, "--json").stdout)  # fmt: skip
    each = [iomodel.flash2(n, n, 16, 2, 16, 16, causal=True) for n in (30, 100, 7)]
    assert out["hbm_bytes"] == 2 * sum(c.hbm_bytes for c in each)
    assert out["padded_hbm_bytes"] == 6 * iomodel.flash2(100, 100, 16, 2, 16, 16, causal=True).hbm_bytes
    assert (out["n"], out["batch"]) == (100, 3)
    assert out["tolerance"]["within"] is True
    table = flashsim("run", "--seqlens", "30,100,7", "--d", 16, "--heads", 2).stdout
    assert "padded to 100 (3 sequences)" in table


def test_softcap_backward_and_counts_only():
    out = json.loads(flashsim("run", "--n", 40, "--d", 8, "--softcap", 5, "--dtype", "fp32", "--backward",
                              "--json").stdout)  # fmt: skip
    assert max(out["backward"]["max_abs_err"].values()) < 1e-5
    counted = json.loads(flashsim("run", "--n", 40, "--d", 8, "--softcap", 5, "--counts-only", "--json").stdout)
    assert "hbm_bytes" not in counted and counted["closed_form"]["per_head"]["hbm_bytes"] > 0


def test_seqlens_backward_equals_the_sequences_closed_forms():
    out = json.loads(flashsim("run", "--seqlens", "30,100,7", "--d", 16, "--heads", 4, "--kv-heads", 2, "--causal",
                              "--window", "20,0", "--dtype", "fp32", "--backward", "--json").stdout)  # fmt: skip
    b = out["backward"]
    each = [iv.gqa("flash2", 1, 4, 2, n, n, 16, 4, b["block_rows"], b["block_cols"], causal=True, window=(20, 0),
                   backward=True) for n in (30, 100, 7)]  # fmt: skip
    assert b["hbm_bytes"] == sum(c.hbm_bytes for c in each)
    assert max(b["max_abs_err"].values()) < 1e-5


def test_decode_page_size_books_pages_and_the_block_table():
    out = json.loads(flashsim("decode", "--nk", 1000, "--d", 32, "--page-size", 64, "--json").stdout)["paged"]
    assert out["pages"] == 16
    assert out["block_table_read_bytes"] == 4 * 16
    assert out["kv_read_bytes"] == 2 * 2 * 1000 * 32
    assert out["max_abs_err"] < 1e-3


def test_trace_shows_blocks_the_window_skips():
    text = flashsim("trace", "--n", 16, "--window", "4,0").stdout
    assert "Skip K_j, V_j" in text


def test_refusals_name_the_option():
    assert error_line(flashsim("run", "--heads", 4, "--kv-heads", 3, code=2)).startswith("error: --kv-heads:")
    assert error_line(flashsim("run", "--algo", "flash1", "--alibi", code=2)).startswith("error: --alibi:")
    assert "--softcap" in error_line(flashsim("run", "--softcap", 0, code=2))
    assert "--seqlens" in error_line(flashsim("run", "--seqlens", "3,0,2", code=2))


@settings(max_examples=30, deadline=None)
@given(value=st.text(min_size=1, max_size=12).filter(lambda s: not s.startswith("-")))
def test_hostile_window_and_seqlens(value):
    for option in ("--window", "--seqlens"):
        result = CliRunner().invoke(app, ["run", "--n", "8", "--d", "4", "--counts-only", option, value])
        if result.exit_code != 0:
            assert result.exit_code == 2
            error_line(result)


@settings(max_examples=20, deadline=None)
@given(big=st.integers(2**53 + 1, 10**40), left=st.booleans(), counts_only=st.booleans())
def test_a_window_or_length_beyond_the_largest_size_is_refused_naming_it(big, left, counts_only):
    """A window bound past 2⁵³ (where NumPy's integers end) was an OverflowError traceback from the mask."""
    for option, value in (("--window", f"{big},0" if left else f"0,{big}"), ("--seqlens", f"5,{big}")):
        args = ["run", "--n", 64, "--d", 8, option, value] + ["--counts-only"] * counts_only
        line = error_line(flashsim(*args, code=2))
        assert (
            line.startswith(f"error: flashsim run: Invalid value for '{option}': ") and "9,007,199,254,740,992" in line
        )


def test_readme_llm_python_example_runs_as_written():
    from pathlib import Path

    import numpy as np

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    part = readme.split("**Attention as today's LLMs run it.**", 1)[1]
    names: dict = {}
    exec(compile(part.split("```python\n", 1)[1].split("```", 1)[0], "README.md", "exec"), names)
    r, g, p, d = names["r"], names["g"], names["p"], names["d"]
    assert g.dk.shape == (2, 2, 256, 64) and r.skipped_tiles > 0
    assert p.output.shape == (137, 8, 64) and p.hbm_bytes < p.padded_hbm_bytes
    assert names["gp"].dq.shape == (137, 8, 64) and names["gp"].dk.shape == names["gp"].dv.shape == (137, 2, 64)
    assert d.output.shape == (2, 8, 1, 64) and d.ledger.per_tensor()["block_table"]["read"] == 4 * (3 + 3) * 2
    assert np.isfinite(d.output.astype(np.float64)).all()


def test_a_trace_names_the_kv_head_its_query_heads_read():
    import numpy as np

    import sim
    from sim.viz import screen, timeline

    q, k = np.ones((1, 6, 8, 4), np.float32), np.ones((1, 2, 8, 4), np.float32)
    heads = sim.run("flash2", q, k, k, record="steps", softcap=3.0)
    packed = sim.run("flash2", q[:, 3:], k[:, 1:], k[:, 1:], record="steps", pack_gqa=True, window=(2, 0))
    assert screen.run_title(timeline.Timeline(heads.trace)).endswith(
        "· softcap=3 · query head 0 reads K/V head 0 (query head h reads K/V head ⌊h/3⌋)"
    )
    assert screen.run_title(timeline.Timeline(packed.trace)).endswith(
        "· window=(2, 0) · query heads 0–2 (packed) read K/V head 0 (query head h reads K/V head ⌊h/3⌋)"
    )


def traced(tmp_path, *args) -> dict:
    """`flashsim trace ARGS --json FILE`'s saved trace, as JSON."""
    path = tmp_path / "trace.json"
    flashsim("trace", *args, "--json", path)
    return json.loads(path.read_text())


def booked(trace: dict) -> tuple[int, int]:
    """The HBM bytes read and written by the traced program (each step carries the running totals)."""
    return trace["steps"][-1]["hbm_read_bytes"], trace["steps"][-1]["hbm_write_bytes"]


def test_trace_takes_kv_heads_and_names_each_query_heads_kv_head(tmp_path):
    # Hq = 6 on Hkv = 2: the traced program is query head 0, which reads K/V head 0; head h reads ⌊h/3⌋
    args = ("--n", 12, "--d", 4, "--heads", 6, "--kv-heads", 2, "--window", "3,0", "--block-rows", 4, "--block-cols", 4)
    t = traced(tmp_path, *args)
    assert (t["config"]["kv_head"], t["config"]["group"], t["config"]["head"]) == (0, 3, [0, 0])
    one = iv.gqa("flash2", 1, 1, 1, 12, 12, 4, 4, 4, 4, window=(3, 0))  # fp32: s = 4; one query head's program
    assert booked(t) == (one.hbm_read_bytes, one.hbm_write_bytes)
    text = " ".join(flashsim("trace", *args, "--width", 400).stdout.split())
    assert "· window=(3, 0) · query head 0 reads K/V head 0 (query head h reads K/V head ⌊h/3⌋)" in text
    packed = traced(tmp_path, *args, "--pack-gqa")
    assert packed["config"]["query_heads"] == [0, 2]
    group = iv.gqa("flash2", 1, 3, 1, 12, 12, 4, 4, 4, 4, window=(3, 0), pack_gqa=True)  # one K/V head's program
    assert booked(packed) == (group.hbm_read_bytes, group.hbm_write_bytes)
    path = tmp_path / "packed.json"  # a packed trace's Q holds N rows per query head: 36 here, and --load reopens it
    flashsim("trace", *args, "--pack-gqa", "--json", path)
    assert json.loads(path.read_text())["hbm"]["Q"]["shape"] == [36, 4]
    reopened = " ".join(flashsim("trace", "--load", path, "--step", 3, "--width", 400).stdout.split())
    assert "query heads 0–2 (packed) read K/V head 0" in reopened


def test_trace_takes_seqlens_and_records_the_first_sequence(tmp_path):
    args = ("--seqlens", "5,9,3", "--d", 4, "--heads", 2, "--causal", "--block-rows", 4, "--block-cols", 2)
    t = traced(tmp_path, *args)
    assert (t["config"]["n"], t["config"]["nk"], t["config"]["seqlens"]) == (5, 5, [5, 9, 3])
    one = iv.gqa("flash2", 1, 1, 1, 5, 5, 4, 4, 4, 2, causal=True)  # sequence 0's first head, no padding to 9
    assert booked(t) == (one.hbm_read_bytes, one.hbm_write_bytes)
    back = traced(tmp_path, *args, "--backward")
    assert back["algorithm"] == "flash2 backward" and back["config"]["seqlens"] == [5, 9, 3]
    Br, Bc = back["config"]["block_rows"], back["config"]["block_cols"]
    closed = iomodel.sum_counts(c for _, c in iv.program("flash2", 5, 5, 4, 4, Br, Bc, causal=True, backward=True))
    assert booked(back) == (closed.hbm_read_bytes, closed.hbm_write_bytes)
    text = " ".join(flashsim("trace", *args, "--width", 400).stdout.split())
    assert "· causal · sequence 0 of 3 packed (lengths 5, 9, 3)" in text


def test_trace_refusals_name_the_option(tmp_path):
    assert error_line(flashsim("trace", "--heads", 3, "--kv-heads", 2, code=2)).startswith("error: --kv-heads:")
    assert error_line(flashsim("trace", "--seqlens", "4,0", code=2)).startswith(
        "error: flashsim trace: Invalid value for '--seqlens'"
    )
    path = tmp_path / "t.json"
    flashsim("trace", "--n", 4, "--json", path)
    for option in (("--kv-heads", 1), ("--seqlens", "3,4")):
        assert error_line(flashsim("trace", "--load", path, *option, code=2)) == (
            f"error: --load: the trace file fixes the run; drop {option[0]}"
        )


@settings(max_examples=20, deadline=None)
@given(value=st.text(min_size=1, max_size=12).filter(lambda s: not s.startswith("-")))
def test_trace_refuses_hostile_kv_heads_and_seqlens(value):
    for option in ("--kv-heads", "--seqlens"):
        result = CliRunner().invoke(app, ["trace", "--n", "4", "--d", "2", option, value])
        if result.exit_code != 0:
            assert result.exit_code == 2
            error_line(result)


def test_counts_only_of_a_variant_is_one_closed_form_per_length_whatever_the_batch(monkeypatch):
    """--batch 10⁶ --counts-only --window 5,0 summed 10⁶ closed forms, one per sequence (over 30 s); equal lengths
    are now counted once and multiplied, and the total is still the batch's."""
    calls = []
    gqa = iv.gqa
    monkeypatch.setattr(iv, "gqa", lambda *a, **k: calls.append(a) or gqa(*a, **k))
    out = json.loads(flashsim("run", "--batch", 10**6, "--n", 64, "--d", 16, "--window", "5,0", "--block-rows", 16,
                              "--block-cols", 16, "--counts-only", "--json").stdout)  # fmt: skip
    assert len(calls) <= 2  # one per schedule
    one = iv.gqa("flash2", 1, 1, 1, 64, 64, 16, 2, 16, 16, window=(5, 0))
    assert out["closed_form"]["per_head"]["hbm_bytes"] == 10**6 * one.hbm_bytes
    packed = json.loads(flashsim("run", "--seqlens", "30,7,30,30", "--d", 16, "--window", "5,0", "--counts-only",
                                 "--block-rows", 16, "--block-cols", 16, "--json").stdout)  # fmt: skip
    each = {m: iv.gqa("flash2", 1, 1, 1, m, m, 16, 2, 16, 16, window=(5, 0)).hbm_bytes for m in (30, 7)}
    assert packed["closed_form"]["per_head"]["hbm_bytes"] == 3 * each[30] + each[7]


def test_seqlens_beside_n_nk_or_batch_is_refused_naming_what_to_drop():
    # --seqlens sets N (the longest), Nk and the batch (one entry a sequence): a typed --n/--nk/--batch would be ignored
    for typed in (("--n", "64"), ("--batch", "2"), ("--nk", "64")):
        line = error_line(flashsim("run", "--seqlens", "30,100,7", "--d", 16, *typed, code=2))
        assert line == f"error: --seqlens: sets N, Nk and the batch itself; drop {typed[0]}"
    line = error_line(flashsim("run", "--seqlens", "30,100", "--n", "64", "--batch", "2", code=2))
    assert line == "error: --seqlens: sets N, Nk and the batch itself; drop --n and --batch"
    assert "--seqlens" in error_line(flashsim("trace", "--seqlens", "30,100", "--n", "64", code=2))


def visible_pairs(n: int, nk: int, Br: int, Bc: int, causal: bool, window) -> int:
    """Tile pairs (i, j) where some query row sees some key, from the definition: row r sees key c when
    r + Nk − N − left ≤ c ≤ r + Nk − N + right (right = 0 under causal), each side unbounded where not given."""
    r, c = np.arange(n)[:, None] + nk - n, np.arange(nk)[None, :]
    left, right = window if window else (-1, -1)
    right = 0 if causal else right  # causal: no key past the diagonal (a window's right side is ≥ 0)
    seen = np.ones((n, nk), bool)
    if left != -1:
        seen &= c >= r - left
    if right != -1:
        seen &= c <= r + right
    return sum(seen[i : i + Br, j : j + Bc].any() for i in range(0, n, Br) for j in range(0, nk, Bc))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 70), st.integers(1, 70), st.sampled_from([1, 4, 16]), st.sampled_from([1, 8, 16]), st.booleans(),
       st.tuples(st.integers(-1, 40), st.integers(-1, 40)))  # fmt: skip
def test_the_window_s_share_of_the_tile_pairs_is_counted_from_the_definition(n, nk, Br, Bc, causal, window):
    share = mask.window_share(n, nk, Br, Bc, causal, window)
    assert share == visible_pairs(n, nk, Br, Bc, causal, window) / max(1, visible_pairs(n, nk, Br, Bc, causal, None))


def test_a_window_s_run_is_priced_at_the_tiles_it_visits(monkeypatch):
    """N = 32,768 with a window of 128 was refused as 1 min of listing over every tile pair; it visits 2 in 256."""
    monkeypatch.setenv("FLASHSIM_MAX_SECONDS", "1")
    said = [error_line(flashsim("run", "--n", "16384", *w, code=2)) for w in ((), ("--window", "128,0"))]
    dense, windowed = (float(re.search(r"would take about ([\d.]+) s", line).group(1)) for line in said)
    assert windowed < dense / 1.5, said


@pytest.mark.parametrize(
    "args, read, written",
    [  # N = 16, d = 4, fp32, Br = Bc = 4: Q_i 64 B, K_j and V_j 64 B each, O_i 64 B, L_i 16 B; by hand
        (("--window", "2,0"), 256 + 7 * 2 * 64, 256 + 64),  # row block i sees K/V blocks i − 1 … i: 7 of 16
        (("--heads", "4", "--kv-heads", "1", "--pack-gqa"), 4 * 256 + 16 * 8 * 64, 4 * (256 + 64)),  # 64 packed rows
    ],
)
def test_a_variant_trace_holds_its_program_to_its_own_closed_form(args, read, written):
    """Red team 95: the viewer's closed form was one plain head's (1,152 B read "56%" of 2,304 under a window;
    "400%" for the packed schedule) and its prediction timed the plain program."""
    common = ("--n", "16", "--d", "4", "--block-rows", "4", "--block-cols", "4")
    trace = json.loads(flashsim("trace", *common, *args, "--json").output)
    closed = Timeline(Trace.from_dict(trace)).closed_form()  # from the config, saved or not (red team 99)
    assert (trace["steps"][-1]["hbm_read_bytes"], trace["steps"][-1]["hbm_write_bytes"]) == (read, written)
    assert (closed.hbm_read_bytes, closed.hbm_write_bytes) == (read, written)
    screen = flashsim("trace", *common, *args, "--step", str(len(trace["steps"]) - 1), env={"COLUMNS": "160"}).output
    assert "Moved so far: 100%" in " ".join(screen.split()) and "predicted" not in screen


def test_a_counting_refusal_caused_by_the_blocks_typed_says_so():
    """Red team 95: --block-rows 1 made the closed forms walk 3·10⁸ row blocks; the hint named only the heads."""
    args = ("run", "--counts-only", "--n", "100000000", "--heads", "8", "--kv-heads", "1", "--window", "5,0")
    line = error_line(flashsim(*args, "--block-rows", "1", "--block-cols", "1", code=2))
    assert line.startswith("error: --block-rows: ") and line.endswith("or a larger --block-rows (Br = 1 here)")
    assert "--block-rows" not in error_line(flashsim(*args, code=2))


def test_alibi_and_a_softcap_are_priced_in_the_float64_check():
    """Red team 99: N = 32,768 with a window, --alibi and --softcap was let through as 29 s and took 39.8 s: the
    definition's bias and tanh cost every one of the N² scores (7.3 and 5.3 ns measured)."""
    said = [error_line(flashsim("run", "--n", "12288", "--window", "128,0", *extra, code=2, env={"FLASHSIM_MAX_SECONDS": "0.01"}))
            for extra in ((), ("--alibi", "--softcap", "30"))]  # fmt: skip
    plain, both = (float(re.search(r"would take about ([\d.]+) s", line).group(1)) for line in said)
    assert both - plain >= (7.3e-9 + 5.3e-9) * 12288**2 - 0.05  # at least what they cost (figures: two digits)


def test_a_variant_run_has_the_plain_run_s_progress_bar(monkeypatch):
    """Helper 114: a run with --kv-heads (or --window, --alibi, --softcap, --seqlens, --pack-gqa) printed nothing for
    9.7 s; its work now runs under the plain run's bar: the forward against its closed-form bytes, the reference, the
    backward and its check."""
    from contextlib import contextmanager

    from sim.cli import progress, variants

    seen = []
    simulating, running = progress.Work.simulating, progress.Work.running

    @contextmanager
    def recorded_simulating(self, description, total_bytes):
        seen.append((description, total_bytes))
        with simulating(self, description, total_bytes):
            yield

    @contextmanager
    def recorded_running(self, description):
        seen.append((description, None))
        with running(self, description):
            yield

    monkeypatch.setattr(progress.Work, "simulating", recorded_simulating)
    monkeypatch.setattr(progress.Work, "running", recorded_running)
    assert variants.Work is progress.Work
    args = ("run", "--n", 96, "--d", 8, "--heads", 4, "--kv-heads", 2, "--window", "20,0", "--backward", "--json")
    out = json.loads(flashsim(*args).stdout)
    assert [name for name, _ in seen] == ["flash2 forward", "float64 reference", "flash2 backward", "float64 gradients"]
    assert seen[0][1] == out["closed_form"]["per_head"]["hbm_bytes"] == out["hbm_bytes"]
