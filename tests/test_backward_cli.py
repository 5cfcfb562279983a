"""`flashsim run --backward`: forward and backward counts side by side, checked against the closed forms."""

import json

import pytest
from click.testing import CliRunner

from sim.algorithms import registry
from sim.cli import app


def run(*args, code=0):
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == code, result.output
    return result


@pytest.mark.parametrize("algo", ["standard", "flash1", "flash2"])
def test_json_splits_flops_and_bytes_into_forward_and_backward(algo):
    N, Nk, d, heads = 96, 80, 16, 3
    out = json.loads(run("--algo", algo, "--n", str(N), "--nk", str(Nk), "--d", str(d), "--heads", str(heads),
                         "--causal", "--backward", "--json").stdout)  # fmt: skip
    b = out["backward"]
    closed = registry.backward_counts(algo, N, Nk, d, 2, b["block_rows"], b["block_cols"], True).times(heads)
    assert (b["hbm_read_bytes"], b["hbm_write_bytes"], b["flops"]) == (
        closed.hbm_read_bytes,
        closed.hbm_write_bytes,
        closed.flops,
    )
    assert b["closed_form"]["matches"] is True
    split = out["forward_backward"]
    assert split["flops"] == {"forward": out["flops"], "backward": b["flops"], "total": out["flops"] + b["flops"]}
    assert split["hbm_bytes"]["total"] == out["hbm_bytes"] + b["hbm_bytes"]
    backward_matmuls = {"standard": 8, "flash1": 10, "flash2": 10}[algo]  # FlashAttention recomputes S = QKᵀ
    if algo != "flash2":  # flash2 skips the tiles the causal mask hides; the others compute every tile
        assert b["flops"] == heads * backward_matmuls * N * Nk * d
    # fp16 gradients of O(1) entries: storage rounding 2⁻¹¹ relative, a few roundings deep
    assert all(0 < e < 2e-2 for e in b["max_abs_err"].values())


def test_counts_only_backward_matches_the_full_run():
    args = ["--algo", "flash2", "--n", "128", "--d", "32", "--heads", "2", "--backward", "--json"]
    full, counted = (json.loads(run(*args, *extra).stdout) for extra in ((), ("--counts-only",)))
    assert counted["backward"]["max_abs_err"] is None
    for key in ("hbm_read_bytes", "hbm_write_bytes", "flops", "sram_peak_bytes", "block_cols"):
        assert counted["backward"][key] == full["backward"][key]


def test_table_shows_forward_backward_and_total():
    out = run("--algo", "flash1", "--n", "64", "--d", "8", "--backward").output
    assert "forward + backward" in out and "backward = closed form" in out and "max |dQ − ref|" in out


def test_without_backward_the_json_has_no_backward():
    out = json.loads(run("--algo", "flash2", "--n", "64", "--d", "8", "--json").stdout)
    assert "backward" not in out and "forward_backward" not in out


def test_backward_blocks_that_do_not_fit_are_one_line_with_exit_code_2():
    result = run("--algo", "flash2", "--n", "256", "--d", "64", "--block-rows", "128", "--block-cols", "128",
                 "--backward", code=2)  # fmt: skip
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --block-rows, --block-cols") and "backward" in lines[0]
