"""`flashsim paper fig2`: GPT-2 medium's counts from first principles, the paper's numbers beside them, the block sweep."""

import json

import pytest
from click.testing import CliRunner

import sim
from sim.cli import app
from sim.lab import paper

HEADS, N, d, s = 64 * 16, 1024, 64, 2


@pytest.fixture(scope="module")
def fig():
    return paper.figure2()


def test_flops_are_twelve_and_fourteen_n_squared_d_per_head(fig):
    # forward QKᵀ and PV: 4N²d; backward dV, dP, dQ, dK: 8N²d; FlashAttention recomputes S = QKᵀ: 2N²d more
    assert fig.standard.forward.flops + fig.standard.backward.flops == HEADS * 12 * N * N * d
    assert fig.flash.forward.flops + fig.flash.backward.flops == HEADS * 14 * N * N * d


def test_standard_attention_makes_eleven_n_by_n_passes(fig):
    # forward (Theorem 2's count): Q, K, V, O once each, S and P written and read
    # backward (Algorithm 3): P read twice, dP written and read, dS written and read twice; Q, K, V, dQ, dK, dV once; dO twice
    assert fig.standard.forward.hbm_bytes == HEADS * s * (4 * N * N + 4 * N * d)
    assert fig.standard.backward.hbm_bytes == HEADS * s * (7 * N * N + 8 * N * d)


def test_flash_traffic_follows_algorithms_1_and_4_with_the_blocks_that_fit(fig):
    fwd, bwd = fig.flash.forward, fig.flash.backward
    assert fwd.sram_peak_bytes <= 163 * 1024 and bwd.sram_peak_bytes <= 163 * 1024
    Tc, Tb = N // fwd.block_cols, N // bwd.block_cols
    # Algorithm 1: K, V read once; Q, O read and O written per K/V block; ℓ, m (float32) read and written per block
    assert fwd.hbm_bytes == HEADS * (
        s * 2 * N * d + Tc * s * 2 * N * d + 4 * Tc * 2 * N + s * N * d + 8 * N + Tc * (s * N * d + 8 * N)
    )
    # Algorithm 4: dQ, dK, dV zeroed; K, V once; Q, O, dO, dQ read, dQ written, ℓ, m read per K/V block; dK, dV written
    assert bwd.hbm_bytes == HEADS * (
        3 * s * N * d + 2 * s * N * d + Tb * (4 * s * N * d + 8 * N) + Tb * s * N * d + 2 * s * N * d
    )


def test_runtime_is_the_sum_of_kernel_rooflines(fig):
    hw = fig.hardware
    for column in (fig.standard, fig.flash):
        expected = sum(
            max(k.counts.flops / hw.peak("fp16"), k.counts.hbm_bytes / hw.hbm_bandwidth) for k in column.kernels
        )
        assert column.runtime_ms == pytest.approx(expected * 1e3, rel=1e-12)
    assert [k.name for k in fig.standard.kernels if k.direction == "forward"] == [
        "S = τQKᵀ",
        "P = softmax(S)",
        "O = PV",
    ]
    assert len([k for k in fig.standard.kernels if k.direction == "backward"]) == 5


def test_middle_panel_equals_the_simulator_and_falls_with_the_block(fig):
    traffic = [b.hbm_bytes for b in fig.blocks]
    assert [b.Bc for b in fig.blocks] == [64, 128, 256, 512]
    assert traffic == sorted(traffic, reverse=True)
    for b in (fig.blocks[0], fig.blocks[-1]):  # the closed form the panel uses is the simulator's ledger
        one = sim.count("flash1", n=N, d=d, dtype="fp16", block_rows=b.Br, block_cols=b.Bc, sram_bytes=b.sram_need)
        assert one.hbm_bytes * HEADS == b.hbm_bytes
    assert [b.fits for b in fig.blocks] == [True, True, True, False]  # 163 KiB of shared memory per thread block
    assert fig.blocks[-1].bound == "compute" and fig.blocks[0].bound == "memory"


def test_notes_explain_each_difference_with_numbers(fig):
    flops, standard, flash, runtime = fig.notes
    assert "issue #741" in flops and "825" in flops and "963" in flops
    extra = (40.3 - fig.standard.hbm_gb) / (HEADS * N * N * s / 1e9)
    assert f"{extra:.1f} more such passes" in standard
    assert "Bc = 256–512" in flash  # Algorithms 1 + 4 move 4.4 GB between these blocks (checked below)
    heads_bytes = [
        (sim.machine.iomodel.flash1(N, N, d, s, Bc) + sim.machine.iomodel.flash1_backward(N, N, d, s, d, Bc)).hbm_bytes
        * HEADS
        for Bc in (256, 512)
    ]
    assert heads_bytes[0] > 4.4e9 >= heads_bytes[1]
    assert f"{fig.standard.runtime_ms / fig.flash.runtime_ms:.1f}×" in runtime


def test_cli_prints_the_model_beside_the_paper_with_ratios():
    result = CliRunner().invoke(app, ["paper", "fig2"])
    assert result.exit_code == 0, result.output
    out = result.output
    for number in ("66.6", "75.2", "40.3", "4.4", "41.7", "7.3", "9.16×", "5.71×", "824.6", "962.1"):
        assert number in out
    assert "Where the model and the paper differ" in out and "counts: the simulator's ledgers" in out


def test_cli_json_carries_both_panels():
    result = CliRunner().invoke(app, ["paper", "fig2", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    left = {row["quantity"]: row for row in out["left"]}
    assert left["HBM R/W (GB)"]["paper"] == {"standard": 40.3, "flash": 4.4, "ratio": pytest.approx(40.3 / 4.4)}
    assert left["GFLOPs"]["model"]["standard"] == pytest.approx(HEADS * 12 * N * N * d / 1e9)
    assert [p["block_cols"] for p in out["middle"]] == [64, 128, 256, 512]
    assert out["ledger_equals_closed_form"] is True and len(out["notes"]) == 4


def test_cli_unknown_hardware_is_one_line_with_exit_code_2():
    result = CliRunner().invoke(app, ["paper", "fig2", "--hardware", "B200"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "--hardware" in result.output
