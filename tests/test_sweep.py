"""`flashsim sweep`: counts from the theorems, roofline time per kernel, where standard attention runs out of memory."""

import csv
import io
import json
import sys
from itertools import pairwise

import pytest
from click.testing import CliRunner
from rich.console import Console

from sim.api import closed_form
from sim.cli import app, estimate
from sim.core.format import duration
from sim.lab import report, sweep
from sim.machine import hardware
from sim.viz import sweep as sweep_viz

A100 = hardware.get("A100-40GB")


def invoke(*args, code=0, env=None):
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})  # wide enough for every column
    assert result.exit_code == code, result.output
    return result


def test_standard_forward_counts_and_three_memory_bound_kernels():
    sw = sweep.sweep([1024, 4096], batch=2, heads=3)
    for r in sw.rows:
        N, d, s, H = r.n, 64, 2, 6
        assert r.standard.hbm_bytes == H * s * (4 * N * N + 4 * N * d)  # Theorem 2's count: S, P written and read
        assert r.standard.flops == H * 4 * N * N * d
        assert r.standard.intensity == r.standard.flops / r.standard.hbm_bytes
        # three kernels, each time = max(FLOPs/peak, bytes/bandwidth): QKᵀ, softmax, PV — all below the ridge here
        qk = max(H * 2 * N * N * d / A100.peak("fp16"), H * s * (2 * N * d + N * N) / A100.hbm_bandwidth)
        sm = H * s * 2 * N * N / A100.hbm_bandwidth
        pv = max(H * 2 * N * N * d / A100.peak("fp16"), H * s * (N * N + 2 * N * d) / A100.hbm_bandwidth)
        assert r.standard.seconds == pytest.approx(qk + sm + pv, rel=1e-12)
        assert r.standard.bound == "memory"


def test_flash2_forward_time_is_one_roofline():
    sw = sweep.sweep([2048], batch=1, heads=1, blocks=(128,))
    r = sw.rows[0]
    N, d, s, B = 2048, 64, 2, 128
    assert (
        r.flash.hbm_bytes == s * (N * d + (N // B) * 2 * N * d) + s * N * d + 4 * N
    )  # FlashAttention-2: Q once, K, V per Q block
    assert r.flash.seconds == pytest.approx(
        max(4 * N * N * d / A100.peak("fp16"), r.flash.hbm_bytes / A100.hbm_bandwidth), rel=1e-12
    )


def test_big_blocks_make_flashattention_compute_bound():
    sw = sweep.sweep([8192], blocks=(512,), srams=(4 << 20,), batch=1, heads=1)
    r = sw.rows[0]
    assert r.flash.intensity > A100.peak("fp16") / A100.hbm_bandwidth  # above the ridge point
    assert r.flash.bound == "compute" and r.standard.bound == "memory"


def test_below_hbm_flashattention_is_compute_bound_where_the_hbm_roofline_says_memory():
    sw = sweep.sweep([2048, 4096, 65536], batch=2, heads=4)
    ridge = A100.peak("fp16") / A100.hbm_bandwidth
    for r in sw.rows[:2]:
        N, d, H = r.n, 64, 8
        assert r.flash.intensity < ridge and r.flash.bound == "memory"  # the paper's roofline at HBM
        seconds, bound = r.flash.below
        assert bound == "tensor" and seconds >= 4 * N * N * d * H / A100.peak("fp16")  # no faster than the peak
        run = json.loads(invoke("run", "--n", str(N), "--d", "64", "--batch", "2", "--heads", "4", "--counts-only",
                                "--json").stdout)["machine"]  # fmt: skip
        assert (run["seconds"], run["bound"]) == (seconds, bound)  # as `flashsim run` predicts the same shape
    assert sw.rows[2].flash.below is None  # 512² tile pairs × 8 heads: more than a sweep plays the L2 for
    rows = json.loads(invoke("sweep", "--n", "2048,65536", "--batch", "2", "--heads", "4", "--json").stdout)["rows"]
    assert rows[0]["flash_below_hbm_bound"] == "tensor" and rows[1]["flash_below_hbm_seconds"] is None
    table = invoke("sweep", "--n", "2048,65536", "--batch", "2", "--heads", "4").stdout.splitlines()
    below = table[table.index(next(line for line in table if line.startswith("flash2 below HBM"))) :]
    assert sw.rows[0].flash.below[0] < 1e-3 and f"2,048 │ {sw.rows[0].flash.below[0] * 1e6:.3g} µs │ tensor" in below[3]
    assert below[4].split() == ["65,536", "│", "—", "│", "—"]


def test_below_hbm_with_the_backward_adds_the_backward_to_the_forward_run_predicts():
    N, args = 2048, ["--n", "2048", "--d", "64", "--batch", "2", "--heads", "4", "--counts-only", "--json"]
    r = sweep.sweep([N], batch=2, heads=4, backward=True).rows[0]
    forward = json.loads(invoke("run", *args).stdout)["machine"]
    assert json.loads(invoke("run", *args, "--backward").stdout)["machine"] == forward  # `run` predicts no backward
    shape = dict(n=N, d=64, batch=2, heads=4, dtype="fp16", causal=False, sram_bytes=A100.sram_bytes, hardware=A100)
    Br, Bc = r.backward_blocks
    backward = report.below_hbm(closed_form.backward("flash2", **shape, block_rows=Br, block_cols=Bc))
    assert (Br, Bc) == (64, 64) and backward["seconds"] > forward["seconds"]  # the backward's own prediction
    assert r.flash.below == (forward["seconds"] + backward["seconds"], backward["bound"])


def test_below_hbm_counts_the_heads_the_model_plays_and_the_estimate_with_them():
    h100 = hardware.get("H100-SXM")  # its SMs' paces spread: the L2 is played for every head at once, not 16
    assert sweep.predicted_steps(4096, (128, 128), None, 256, A100) == (32 * 32 * 16, 0)
    assert sweep.predicted_steps(4096, (128, 128), None, 256, h100) == (32 * 32 * 256, 0)
    assert sweep.predicted_steps(4096, (128, 128), (64, 64), 256, A100) == (32 * 32 * 16, 64 * 64 * 16)
    assert sweep.predicted_steps(8192, (128, 128), None, 256, h100) == (0, 0)  # 64² pairs × 256 heads: > MOST_STEPS
    assert sweep.predicted_steps(4096, (128, 128), None, 4096, A100) == (0, 0)  # 131,072 thread blocks: none
    assert sweep.sweep([8192], hardware=h100).rows[0].flash.below is None
    refused = invoke("sweep", "--n", "512,2048", "--hardware", "h100-sxm", code=2, env={"FLASHSIM_MAX_SECONDS": "0.1"})
    assert refused.stderr.startswith("error: --hardware: a sweep of 2 configurations would take about 0.35 s")


def test_the_estimate_charges_a_backward_block_step_its_own_time():
    # N = 1,024, 2,048 on the A100, 16 × 16 heads: 16 of them played; forward 128 × 128, backward 64 × 64 blocks
    forward, backward = 16 * (8**2 + 16**2), 16 * (16**2 + 32**2)
    row_blocks = 2 * (8 + 16)  # a sum over the row blocks of each pass's closed form
    seconds = 2 * estimate.PER_CONFIGURATION + row_blocks * estimate.CLOSED_FORM_PER_ROW_BLOCK
    seconds += forward * estimate.PER_PREDICTED_STEP + backward * estimate.BACKWARD_PER_PREDICTED_STEP
    assert estimate.BACKWARD_PER_PREDICTED_STEP > 2 * estimate.PER_PREDICTED_STEP  # measured: 12.7–20.3 µs, 3.8–5.1
    refused = invoke("sweep", "--n", "1024,2048", "--backward", code=2, env={"FLASHSIM_MAX_SECONDS": "0.01"})
    assert refused.stderr.startswith(f"error: --n: a sweep of 2 configurations would take about {duration(seconds)}")
    assert duration(seconds) == "0.35 s"  # 0.13 s were the backward charged the forward's 5 µs a step


def test_blocks_that_do_not_fit_are_refused_at_the_d_and_n_where_they_do_not():
    line = invoke("sweep", "--n", "2048", "--d", "16,128", "--block", "64", "--backward", code=2).stderr.strip()
    assert line.startswith("error: --block, --d: --block 64 gives Br=64, Bc=64")
    assert line.endswith("but the SRAM holds 166,912 B (163.0 KiB), at d = 128, N = 2048")
    limit = {"FLASHSIM_MAX_SECONDS": "1e-9"}
    refused = invoke("sweep", "--n", "65536", "--batch", "1", "--heads", "1", code=2, env=limit)
    assert refused.stderr.startswith("error: --n: a sweep of 1 configuration")  # --heads 1 has nothing smaller to try


def test_standard_runs_out_of_memory_where_s_and_p_outgrow_hbm():
    def memory(N, d=64, s=2, heads=16 * 16):  # S, P (N × N) and Q, K, V, O (N × d) per head
        return heads * s * (2 * N * N + 4 * N * d)

    sw = sweep.sweep([2048, 4096, 8192, 16384], batch=16, heads=16)
    assert sw.oom_n == 8192
    assert memory(sw.largest_n) <= 40e9 < memory(sw.largest_n + 1)
    assert [r.standard_fits for r in sw.rows] == [True, True, False, False]
    flash = [r.flash.memory_bytes for r in sw.rows]  # O(N): Q, K, V, O and L
    assert all(2 * a == b for a, b in pairwise(flash)) and flash[-1] < 40e9
    assert sweep.sweep([2048, 4096], batch=1, heads=1).oom_n is None


def test_backward_adds_the_backward_kernels_and_its_blocks():
    fwd = sweep.sweep([1024], batch=1, heads=1)
    both = sweep.sweep([1024], batch=1, heads=1, backward=True)
    N, d, s = 1024, 64, 2
    assert both.rows[0].standard.flops == 12 * N * N * d and fwd.rows[0].standard.flops == 4 * N * N * d
    assert both.rows[0].standard.hbm_bytes - fwd.rows[0].standard.hbm_bytes == s * (7 * N * N + 8 * N * d)
    assert both.rows[0].backward_blocks is not None and fwd.rows[0].backward_blocks is None


def test_sweeping_d_block_and_sram_gives_every_combination():
    sw = sweep.sweep([1024, 2048], ds=(32, 64), blocks=(32, 64), srams=(100_000, 200_000), batch=1, heads=1)
    assert len(sw.rows) == 16
    assert {(r.d, r.block_cols, r.sram_bytes) for r in sw.rows} == {
        (d, b, m) for d in (32, 64) for b in (32, 64) for m in (100_000, 200_000)
    }


def test_cli_json_and_csv_agree():
    args = ["sweep", "--n", "1024,2048,8192", "--batch", "16", "--heads", "16"]
    as_json = json.loads(invoke(*args, "--json").stdout)
    as_csv = list(csv.DictReader(io.StringIO(invoke(*args, "--csv").stdout)))
    assert as_json["oom_n"] == 8192 and len(as_csv) == 3
    for j, c in zip(as_json["rows"], as_csv, strict=True):
        assert int(c["standard_hbm_bytes"]) == j["standard_hbm_bytes"] and c["standard_fits"] == str(j["standard_fits"])


def test_cli_table_names_the_oom_row():
    out = invoke("sweep", "--n", "4096,8192").output
    assert "OOM" in out and "runs out of memory at N = 8,192" in out


def test_plot_without_matplotlib_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    result = invoke("sweep", "--n", "1024,2048", "--plot", str(tmp_path / "f.png"), code=2)
    assert "pip install matplotlib" in result.output and len(result.output.strip().splitlines()) == 1


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    invoke("sweep", "--n", "1024,2048,4096", "--backward", "--plot", str(tmp_path / "f.png"))
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args, where",
    [
        (["--n", "0,1024"], "--n"),
        (["--n", "1k"], "--n"),
        (["--block", "4096"], "--block: --block 4096 gives Br=512"),
        (["--json", "--csv"], "--json"),
        (["--dtype", "fp8"], "--dtype"),
    ],
)
def test_cli_bad_input_is_one_line_with_exit_code_2(args, where):
    result = invoke("sweep", *args, code=2)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and where in lines[0] and "Traceback" not in result.output


def test_a_sweep_of_no_rows_renders():
    # before: IndexError at sw.rows[0] (the blocks named in the title), where the table before had rendered it
    console = Console(width=80, file=io.StringIO())
    console.print(sweep_viz.table(sweep.sweep([])))
    assert "standard attention fits every N of this sweep" in console.file.getvalue()


def test_a_backward_the_machine_model_does_not_cover_plays_no_l2_and_costs_nothing():
    # review h73: flash1's backward (not modelled) played the forward's L2, then dropped it, and its estimate
    # charged the backward's steps too
    assert sweep.predicted_steps(1024, (128, 128), (64, 64), 256, A100, "flash1") == (0, 0)
    assert sweep.predicted_steps(1024, (128, 128), None, 256, A100, "flash1") == (8 * 8 * 16, 0)
    assert sweep.predicted_steps(1024, (128, 128), (64, 64), 256, A100, "flash2") == (8 * 8 * 16, 16 * 16 * 16)
