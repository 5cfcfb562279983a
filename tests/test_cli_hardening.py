"""Issue 14's findings, one test each: what a new user typed, and the clear, fast answer it must get."""

import json
import re
import tracemalloc

import numpy as np
import pytest
from click.testing import CliRunner

import sim
from sim.api import tolerance as tolerance_
from sim.cli import app
from sim.core.errors import InputError
from sim.machine import iomodel
from tests.cli_runner import error_line, flashsim


def peak_bytes(*args) -> int:
    tracemalloc.start()
    try:
        flashsim(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_error_figure_of_a_flash2_run_holds_no_n_by_n_matrix():
    N = 4096
    assert peak_bytes("run", "--algo", "flash2", "--n", N, "--d", 16, "--quiet") < 8 * N * N / 2


def test_counts_only_is_the_closed_form_and_holds_no_n_by_n_matrix():
    N = 4096
    assert peak_bytes("run", "--algo", "standard", "--n", N, "--d", 64, "--counts-only", "--quiet") < 4 * 2**20
    out = json.loads(flashsim("run", "--algo", "standard", "--n", 100_000, "--d", 64, "--counts-only", "--json").stdout)
    c = iomodel.standard(100_000, 100_000, 64, 2)
    assert (out["hbm_read_bytes"], out["hbm_write_bytes"], out["flops"]) == (
        c.hbm_read_bytes,
        c.hbm_write_bytes,
        c.flops,
    )
    assert out["source"] == "closed form"
    assert "closed form" in flashsim("run", "--algo", "standard", "--n", 100_000, "--counts-only").stdout


@pytest.mark.parametrize(
    "args,option",
    [
        (("run", "--n", 10**9), "--n"),
        (("run", "--hardware", "toy"), "--hardware"),  # blocks of 1 × 1: a million tile pairs
        (("run", "--n", 4096, "--block-rows", 1, "--block-cols", 1), "--block-rows"),
        (("run", "--algo", "standard", "--n", 10**6, "--d", 8), "--n"),
        (("trace", "--n", 10**6), "--n"),
        (("run", "--batch", 10**6, "--n", 4096), "--batch"),
        (("run", "--batch", 200_000, "--n", 16, "--d", 4), "--batch"),  # a tile pair each: the heads' own time
    ],
)
def test_what_would_not_fit_or_would_take_too_long_is_refused_before_any_work(args, option, monkeypatch):
    def no_work(*_, **__):
        raise AssertionError("the command started the work it should have refused")

    monkeypatch.setattr(sim, "run", no_work)
    line = error_line(flashsim(*args, code=2))
    assert line.startswith(f"error: {option}: ") and "about" in line and "try" in line


@pytest.mark.parametrize("command", ["run", "trace"])
def test_a_negative_seed_is_refused_naming_it(command):
    assert "--seed" in error_line(flashsim(command, "--seed", -1, code=2))


def test_when_standard_attention_moves_fewer_bytes_the_summary_says_fewer():
    # flash1 with K/V blocks of one key: Q and O make Nk round trips, 2/d as many bytes for standard attention
    out = flashsim("run", "--algo", "flash1", "--n", 64, "--d", 64, "--block-rows", 64, "--block-cols", 1).stdout
    flash, standard = iomodel.flash1(64, 64, 64, 2, 1).hbm_bytes, iomodel.standard(64, 64, 64, 2).hbm_bytes
    assert f"{flash / standard:.1f}× fewer" in out and "× more" not in out
    out = flashsim("run", "--algo", "flash2", "--n", 4096, "--d", 64, "--counts-only").stdout
    assert (
        f"{iomodel.standard(4096, 4096, 64, 2).hbm_bytes / iomodel.flash2(4096, 4096, 64, 2, 128, 128).hbm_bytes:.1f}× more"
        in out
    )


def test_blocks_larger_than_n_are_clamped_in_every_command():
    run = json.loads(flashsim("run", "--n", 100, "--block-rows", 4096, "--block-cols", 4096, "--json").stdout)
    assert (run["block_rows"], run["block_cols"]) == (100, 100)
    trace = flashsim("trace", "--n", 100, "--d", 8, "--block-rows", 4096, "--block-cols", 4096, "--step", 0).stdout
    assert "Br=100 Bc=100" in trace
    sweep = json.loads(flashsim("sweep", "--n", 100, "--block", 4096, "--json").stdout)
    assert (sweep["rows"][0]["block_rows"], sweep["rows"][0]["block_cols"]) == (100, 100)


def test_the_sweep_says_which_d_does_not_fit():
    assert "d = 512" in error_line(flashsim("sweep", "--d", "64,512", "--block", 128, code=2))


def test_backward_from_a_forward_that_kept_no_lse_says_what_it_kept():
    q = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
    r = sim.run("flash1", q, q, q)
    with pytest.raises(InputError) as e:
        sim.backward("flash1", q, q, q, r.output, r.lse, q)
    assert str(e.value).startswith("lse_or_stats: ") and "result.stats" in str(e.value)


def test_version():
    out = flashsim("--version").stdout
    assert re.fullmatch(r"flashsim \d+\.\d+\.\d+\n", out)


def test_one_dimension_is_singular():
    with pytest.raises(InputError, match=r"has 1 dimension;"):
        sim.run("flash2", np.ones(8), np.ones((8, 4)), np.ones((8, 4)))


def test_run_gives_a_verdict_beside_the_error():
    out = json.loads(flashsim("run", "--n", 300, "--d", 32, "--json").stdout)
    assert out["tolerance"]["within"] is True and out["max_abs_err"] <= out["tolerance"]["bound"]
    text = flashsim("run", "--n", 300, "--d", 32).stdout
    assert "✓ within" in text and "u·max|ref| + (1 + u)·A" in text


def test_a_run_outside_its_tolerance_says_so_and_exits_1(monkeypatch):
    monkeypatch.setitem(tolerance_.U, "fp16", 0.0)  # as if nothing rounded: the bound is 0, the real error is not
    monkeypatch.setattr(tolerance_, "W", 0.0)
    result = flashsim("run", "--n", 300, "--d", 32, code=1)
    assert "✗ outside" in result.stdout


def test_the_html_export_has_a_title(tmp_path):
    path = tmp_path / "t.html"
    flashsim("trace", "--n", 8, "--step", 3, "--html", path)
    assert re.search(r"<title>flashsim trace flash2 · N=8", path.read_text())


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_frame_delay_that_is_no_number_of_seconds_is_refused(value):
    """--delay nan passed click's range (NaN compares false) and reached time.sleep in a terminal."""
    assert "--delay" in error_line(flashsim("trace", "--n", 8, "--play", "--delay", value, code=2))


@pytest.mark.parametrize(
    "args",
    [
        ["assignments", "export", "01", "--student", "{dir}"],
        ["trace", "--n", "4", "--d", "4", "--json", "{dir}/t.json"],
        ["lessons", "copy", "{dir}"],
    ],
)
def test_a_path_the_user_names_is_printed_as_written(args, tmp_path):
    """A folder or file name is text: `[bold]` in it is printed, not taken as rich markup (which showed another path,
    and a `[/…]` in it stopped the command with a traceback after the file was written)."""
    where = tmp_path / "run[bold]1"
    where.mkdir()
    out = CliRunner().invoke(app, [a.replace("{dir}", str(where)) for a in args])
    assert out.exit_code == 0, out.output
    assert str(where) in out.output.replace("\n", ""), out.output  # a long path may wrap


@pytest.mark.parametrize(
    "option, largest",
    [("--n", 2**53), ("--d", 2**53), ("--batch", 2**53), ("--sram-bytes", 2**53), ("--seed", 2**64 - 1)],
)
def test_a_size_beyond_the_largest_is_refused_with_the_largest(option, largest):
    """--n 10³⁰ was refused as "not in the range 1 or more" (it is): the line now names the largest, typed back."""
    out = CliRunner().invoke(app, ["run", option, str(10**30)])
    assert out.exit_code == 2 and "or more" not in out.stderr and f"more than {largest:,}, " in out.stderr, out.stderr
    assert CliRunner().invoke(app, ["run", option, str(largest), "--counts-only"]).exit_code in (0, 2)


@pytest.mark.parametrize("option", ["--batch", "--heads"])
def test_counts_only_at_a_large_batch_holds_no_block_per_head(option):
    """The machine model's table listed every thread block of every head: --batch 10⁶ --counts-only took 95 s and
    6.4 GB before answering (10⁷: killed for memory). A grid past the model's bound is left out, as a long N is."""
    assert peak_bytes("run", option, 30_000, "--counts-only", "--quiet") < 16 * 2**20
    out = json.loads(flashsim("run", option, 10**9, "--counts-only", "--json").stdout)
    assert out["machine"] is None and out["hbm_bytes"] == 10**9 * iomodel.flash2(1024, 1024, 64, 2, 128, 128).hbm_bytes
