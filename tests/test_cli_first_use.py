"""`flashsim` as a new user types it (a pass over the CLI whose fixes were lost, made again): one test per finding,
each failing before its fix (the 80-column walkthrough, already fixed, is test_viewer's)."""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.core.errors import InputError
from sim.lab import walkthrough
from sim.machine import blocks
from sim.viewer import keys
from sim.viz import screen
from sim.viz.timeline import Timeline
from sim.viz.values import matrix
from tests.cli_runner import error_line, flashsim

LARGEST = "9,007,199,254,740,992"  # 2⁵³, the largest size an option or a --load trace takes
WALKTHROUGH = Timeline(walkthrough.flash().trace)  # 28 steps


def flat(text: str) -> str:
    """`text` with its wrapping undone: every run of whitespace one space."""
    return " ".join(text.split())


# -- 1: --json naming a folder -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["run", "--n", 64], ["trace", "--n", 8]])
def test_json_naming_a_folder_is_refused_before_any_work(command, tmp_path, monkeypatch):
    """A folder is not a regular file, so `special` took it for a device: written after the work, refused then as
    "error: DIR: Is a directory", naming no option."""
    monkeypatch.setattr(sim, "run", lambda *a, **k: pytest.fail("the work ran"))
    for folder in (str(tmp_path), f"{tmp_path}/"):
        line = error_line(flashsim(*command, "--json", folder, code=2))
        assert line == f"error: flashsim {command[0]}: Invalid value for '--json': {folder!r} is a folder, not a file"


# -- 2: times below HBM, shared memory ---------------------------------------------------------------------------------


def test_times_below_hbm_are_in_microseconds_and_shared_memory_in_kib():
    args = ["run", "--hardware", "h100-sxm", "--n", 1024, "--counts-only"]
    m = json.loads(flashsim(*args, "--json").stdout)["machine"]
    # Br = Bc = 128, d = 64, fp16: Q_i, K_j, V_j 16 KiB each, O_i 32, S_ij and P̃_ij 64, statistics 2 = 146 KiB
    assert m["launch"] == "128 threads, 146.0 KiB shared, 255 registers, wgmma"
    assert 1e-6 < m["seconds"] < 1e-3 and 0 < m["terms"]["DRAM"] < 1e-6
    out = flashsim(*args).stdout
    assert "146.0 KiB shared" in flat(out) and " ms " not in out
    predicted = next(line for line in out.splitlines() if "predicted (bound" in line)
    assert f" {m['seconds'] * 1e6:.3g} µs │" in predicted  # was 0.01519 ms
    dram = next(line for line in out.splitlines() if line.startswith(" DRAM "))
    assert f" {m['terms']['DRAM'] * 1e6:.3g} µs │" in dram  # was 0.0001174 ms


def test_the_trace_title_gives_the_sram_in_kib():
    title = flat(flashsim("trace", "--hardware", "h100-sxm", "--n", 256).stdout.split("\n\n")[0])
    assert title.endswith("SRAM 227.0 KiB (H100-SXM) 14 steps, one paragraph each.")  # was SRAM 232,448 B


# -- 3: lists cut short say how many were left -------------------------------------------------------------------------


def test_a_matrix_cut_short_says_how_many_rows_and_columns_were_left():
    eight = [[float(8 * r + c) for c in range(8)] for r in range(8)]
    shown = matrix(eight, room=40).splitlines()  # cells "63.000": 4 of 8 columns in 40, 6 of 8 rows
    assert len(shown) == 7 and shown[0] == "[ 0.000   1.000   2.000   3.000  …]"
    assert shown[-1] == "… 2 more rows of 8, 4 more columns of 8"  # was "… 8 rows", the columns unsaid
    assert matrix([float(x) for x in range(20)], room=40).splitlines()[-1] == "… 16 more of 20"
    assert matrix(eight, room=24).splitlines()[-2:] == ["… 2 more rows of 8", "… 6 more columns of 8"]  # narrow
    assert "…" not in matrix(eight[:7], room=80)  # a single row left out would be shown: no count


def test_packed_lengths_cut_short_say_how_many_were_left():
    title = screen.variant_title({"seqlens": [3, 1, 4, 1, 5, 9, 2, 6]})
    assert title == " · sequence 0 of 8 packed (lengths 3, 1, 4, 1, 5, 9, … 2 more)"


def test_a_loaded_traces_unknown_counts_are_named_with_how_many_more(tmp_path):
    path = tmp_path / "trace.json"
    flashsim("trace", "--n", 8, "--json", path)
    d = json.loads(path.read_text())
    d["config"]["closed_form"] = {name: 1 for name in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")}
    path.write_text(json.dumps(d))
    line = error_line(flashsim("trace", "--load", path, code=2))
    assert "config closed_form holds 'alpha', 'beta', 'gamma', 'delta', … 2 more of 6, not a closed form" in line


# -- 4: --help says what to type ---------------------------------------------------------------------------------------


def test_help_metavars_say_what_to_type_and_the_seed_range_once():
    text = flat(flashsim("run", "--help").stdout)
    assert "--window LEFT,RIGHT Sliding window" in text and "--seqlens N[,N…] A packed batch" in text
    seed = text[text.index("--seed") : text.index("--counts-only")]
    assert seed.count("0 or more") == 1, seed


# -- 5: the viewer's `g` -----------------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(digits=st.text("0123456789", min_size=1, max_size=6000))
def test_g_caps_the_digits_typed(digits):
    """5,000 nines then enter was a ValueError traceback from int() (past 4,300 digits); now the digits stop one past
    the last step's (28 steps: 0 … 27, so 3), leading zeros dropped."""
    v = keys.Viewer(WALKTHROUGH, k=5)
    for key in ("g", *digits):
        v.press(key)
    typed = digits.lstrip("0")[:3] or "0"
    assert v.footer.startswith(f"go to step: {typed}▏")
    v.press("enter")
    step = int(typed)
    assert v.k == (step if step <= 27 else 5) and v.typed is None
    assert step <= 27 or v.footer.startswith(f"no step {step}: this trace has steps 0 … 27")


# -- 6: --counts-only gives no verdict; the backward's title -----------------------------------------------------------


def test_counts_only_prints_no_verdict_and_the_backward_title_once():
    out = flashsim("run", "--n", 256, "--counts-only", "--backward").stdout
    row = next(line for line in out.splitlines() if line.startswith("max |O − ref|"))
    assert row.split() == ["max", "|O", "−", "ref|", "not", "computed", "(--counts-only)"]  # was "… vs float64"
    assert "✓" not in out and "✗" not in out
    assert "backward HBM traffic (closed form, per kernel)" in out and ") (" not in out


def test_a_variants_backward_is_not_dropped_unsaid_by_counts_only():
    """`run --window 8,0 --counts-only --backward` printed the forward's closed form alone."""
    line = error_line(flashsim("run", "--n", 256, "--window", "8,0", "--counts-only", "--backward", code=2))
    assert line.startswith("error: --backward: not with --counts-only and a variant")


# -- 7: even the smallest blocks ---------------------------------------------------------------------------------------


def test_when_even_the_smallest_blocks_are_too_big_it_is_said_once():
    # d = 4, fp32, Br = Bc = 1: Q_i, K_j, V_j, O_i 16 B each, P̃_ij 4 B, ℓ_i, m_i, m_new, α_i 16 B: 84 B
    line = error_line(flashsim("trace", "--sram-bytes", 50, code=2))
    assert line == (
        "error: --sram-bytes: even the smallest blocks are too big: Br = Bc = 1 need 84 B of SRAM for flash2 but "
        "the SRAM holds 50 B"
    )  # was "… Br=1, Bc=1, which need 84 B (84 B) … (Q_i 16 B, K_j 16 B, …) … 50 B (50 B)"


# -- 8, 10: list options' ranges; the largest size ---------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    option=st.sampled_from(
        [("sweep", "--n", 1), ("decode", "--splits", 1), ("run", "--seqlens", 1), ("run", "--window", -1)]
    ),
    bad=st.one_of(st.integers(-(10**30), 0), st.integers(2**53 + 1, 10**30)),
    first=st.booleans(),
)
def test_a_list_value_out_of_range_is_named_with_the_range_once(option, bad, first):
    command, flag, least = option
    bad = bad + least - 1 if bad <= 0 else bad  # below `least`, or above 2⁵³
    value = f"{bad},5" if first else f"5,{bad}"
    line = error_line(flashsim(command, flag, value, code=2))
    assert line.startswith(f"error: flashsim {command}: Invalid value for '{flag}': {bad} is ")
    if bad < least:
        assert line.endswith(f" not in the range {least} or more.")  # was "'0,5': every value must be 1 … 2**53"
    else:
        assert line.endswith(f" more than {LARGEST}, the largest it takes")
    assert "**" not in line and line.count(" or more") + line.count("largest") == 1


def test_a_loaded_traces_size_beyond_the_largest_is_said_in_digits(tmp_path):
    path = tmp_path / "trace.json"
    flashsim("trace", "--n", 8, "--json", path)
    d = json.loads(path.read_text())
    d["config"]["kv_head"] = 2**60
    path.write_text(json.dumps(d))
    line = error_line(flashsim("trace", "--load", path, code=2))
    assert f"config kv_head is {2**60}, not a whole number from 0 to {LARGEST} (as the command line)" in line


# -- 12: Flash-Decoding's query rows -----------------------------------------------------------------------------------


def test_too_many_decode_queries_say_which_fit():
    # d = 128, fp16, one split, one key: Q 2·128 + O_p 4·128 + P̃ 4 + ℓ, m, m_new, α 16 = 788 B a query row beside
    # K_j, V_j's 512; the A100's 166,912 B hold 211 rows (211 · 788 + 512 = 166,780), not 212 (167,568)
    line = error_line(flashsim("decode", "--queries", 1000, code=2))
    assert line == (
        "error: --queries: 1,000 query rows need 788,512 B (770.0 KiB) of SRAM for Flash-Decoding, even one key at "
        "a time in one split, but the A100-40GB's SRAM holds 166,912 B (163.0 KiB): --queries 211 fits"
    )  # was "--queries: Br=1000, Bc=1, which need …", then "… in 6 splits …: --queries 158 fits"
    assert "--queries 211 fits" in error_line(flashsim("decode", "--queries", 212, code=2))
    with pytest.raises(InputError, match=r"^blocks: 1,000 query rows need .* in 6 splits, .*: at most 158 query rows"):
        blocks.decoding_fit(1000, 32768, 128, 2, 166_912, 6)  # sim.decode's own, in the splits it is given


def test_many_decode_queries_take_fewer_splits_not_a_refusal():
    # 200 rows: 6 splits' combine (4·6 + 8 + 1,024 = 1,056 B a row) would need 211,200 B, 2 splits' 1,040 B a row
    # 208,000 B; one split's 788 · 200 + 512 = 158,112 B fits the A100's 166,912 (was refused: "--queries 158 fits")
    out = flashsim("decode", "--queries", 200, "--quiet").stdout
    assert "one head simulated in 1 split:" in out


def test_decode_rows_whose_combine_does_not_fit_are_marked():
    # 160 rows: 2 splits' combine 160 · (4·2 + 8 + 1,024) = 166,400 B fits 166,912; 4 splits' 167,680 B does not
    data = json.loads(flashsim("decode", "--queries", 160, "--splits", "1,2,4,8", "--json").stdout)
    assert [r["fits_sram"] for r in data["rows"]] == [True, True, False, False] and data["best_splits"] == 2
    out = flashsim("decode", "--queries", 160, "--splits", "1,2,4,8").stdout
    assert "*: the fastest that fits, 2 splits" in out and out.count("µs†") == 2


@settings(max_examples=4, deadline=None)
@given(queries=st.integers(212, 10**6), nk=st.sampled_from([512, 4096]), heads=st.sampled_from([1, 16]))
def test_the_queries_a_refusal_suggests_are_taken(queries, nk, heads):
    """The model picks the splits by the query rows: a suggestion is checked in its own splits, not the refused's."""
    shape = ["--nk", nk, "--heads", heads, "--d", 128]
    line = error_line(flashsim("decode", "--queries", queries, *shape, code=2))
    fits = int(re.search(r"--queries (\d+) fits$", line)[1])
    flashsim("decode", "--queries", fits, *shape, "--quiet")


# -- 13: --softcap's bound ---------------------------------------------------------------------------------------------


def test_the_softcap_bound_is_readable_and_says_why():
    line = error_line(flashsim("run", "--softcap", 0, code=2))
    assert "2⁻⁹⁹ ≈ 1.58e-30" in line and "overflows S/c in float32" in line and "1.57772e-30" not in line
    assert "2⁻⁹⁹ ≈ 1.58e-30" in flat(flashsim("run", "--help").stdout)
    flashsim("run", "--n", 8, "--d", 4, "--softcap", "1.58e-30", "--counts-only")  # the bound typed back is taken
    assert re.search(r"1\.57e-30 is not", error_line(flashsim("run", "--softcap", "1.57e-30", code=2)))
