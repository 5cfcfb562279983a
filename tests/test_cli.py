"""The CLI as a user types it, checked against values computed independently of the command."""

import json

import numpy as np
from click.testing import CliRunner

import sim
from sim.api import reference
from sim.cli import app
from sim.lab import walkthrough
from sim.machine import iomodel


def invoke(*args):
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_run_json_has_the_contract_fields_and_exact_counts():
    out = json.loads(invoke("run", "--algo", "flash2", "--n", "300", "--nk", "200", "--d", "24", "--batch", "2",
                            "--heads", "3", "--causal", "--block-rows", "64", "--block-cols", "32", "--json").stdout)  # fmt: skip
    for key in ("algorithm", "n", "nk", "d", "batch", "heads", "dtype", "causal", "block_rows", "block_cols",
                "sram_bytes", "hbm_read_bytes", "hbm_write_bytes", "flops", "sram_peak_bytes", "max_abs_err"):  # fmt: skip
        assert key in out
    expected = iomodel.flash2(300, 200, 24, 2, 64, 32, causal=True).times(6)
    assert (out["hbm_read_bytes"], out["hbm_write_bytes"], out["flops"]) == (
        expected.hbm_read_bytes,
        expected.hbm_write_bytes,
        expected.flops,
    )
    assert (out["batch"], out["heads"], out["dtype"], out["causal"]) == (2, 3, "fp16", True)
    assert 0 < out["max_abs_err"] < 2.0**-11 * 4  # fp16 output rounding of values below 4 in magnitude


def test_counts_only_matches_full_run_and_skips_numerics():
    args = ["run", "--algo", "flash1", "--n", "200", "--d", "16", "--heads", "4", "--json"]
    full = json.loads(invoke(*args).stdout)
    counted = json.loads(invoke(*args, "--counts-only").stdout)
    assert counted["max_abs_err"] is None
    for key in ("hbm_read_bytes", "hbm_write_bytes", "flops", "sram_peak_bytes"):
        assert counted[key] == full[key]


def test_counts_only_at_paper_scale():
    out = json.loads(invoke("run", "--algo", "standard", "--n", "1024", "--d", "64", "--batch", "64", "--heads", "16",
                            "--counts-only", "--json").stdout)  # fmt: skip
    # Algorithm 0 in fp16 for 1024 heads: Θ(N² + Nd) per head
    per_head = 2 * (1024 * 64 + 2 * 1024 * 64 + 2 * 1024 * 1024) + 2 * (2 * 1024 * 1024 + 1024 * 64)
    assert out["hbm_bytes"] == 1024 * per_head


def test_run_table_shows_the_totals():
    text = invoke("run", "--algo", "flash2", "--n", "512", "--d", "32").stdout
    total = iomodel.flash2(512, 512, 32, 2, 128, 128).hbm_bytes
    assert f"{total:,}" in text and "= closed form" in text


def test_walkthrough_json_is_the_whole_trace():
    trace = json.loads(invoke("walkthrough", "--json").stdout)
    assert trace["inputs"]["q"] == walkthrough.Q.tolist()
    ref, _ = reference.attention(walkthrough.Q, walkthrough.K, walkthrough.V)
    assert np.abs(np.array(trace["output"]) - ref).max() < 1e-6
    steps = trace["steps"]
    assert [s["index"] for s in steps] == list(range(len(steps)))
    loads = [(s["i"], s["j"]) for s in steps if s["line"] == 8]  # Algorithm 1, line 8: load Q_i, O_i, ℓ_i, m_i
    assert loads == [(0, 0), (1, 0), (0, 1), (1, 1)]  # outer loop over K/V blocks j, inner over Q blocks i
    assert steps[-1]["hbm_read_bytes"] == iomodel.flash1(4, 4, 4, 4, 2).hbm_read_bytes


def test_walkthrough_is_readable_at_80_columns():
    text = CliRunner().invoke(app, ["walkthrough"], env={"COLUMNS": "80"}).stdout
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "line 12" in text and "max |O − float64 reference|" in text


def test_bare_command_shows_help_not_an_error():
    result = CliRunner().invoke(app, [])
    assert result.exit_code == 0 and "Usage: flashsim" in result.stdout and "walkthrough" in result.stdout


def test_bench_sim_reports_the_blocks_it_ran_and_probes_memory_in_a_fresh_process(tmp_path):
    path = tmp_path / "bench.json"
    text = invoke(
        "bench", "sim", "--n", "64", "--d", "16", "--repeats", "1", "--memory-n", "128", "--json", str(path)
    ).stdout
    report = json.loads(path.read_text())
    q = np.zeros((64, 16), np.float16)
    for row in report["rows"]:
        ran = sim.run(row["algorithm"], q, q, q)
        assert (row["block_rows"], row["block_cols"]) == (ran.block_rows, ran.block_cols)
        assert f"sim {row['algorithm']}" in text
    memory = report["memory"]
    probe = sim.run("flash2", *(np.zeros((128, 16), np.float16),) * 3)
    assert (memory["n"], memory["d"], memory["n_by_n_float32_bytes"]) == (128, 16, 4 * 128 * 128)
    assert (memory["block_rows"], memory["block_cols"]) == (probe.block_rows, probe.block_cols)
    assert memory["peak_rss_bytes"] >= memory["rss_before_run_bytes"] > 0
