"""Block rules: the paper's Bc = ⌈M/4d⌉, Br = min(Bc, d), whether it fits, and the largest blocks that do."""

import numpy as np
import pytest

import sim
from sim import blocks
from sim.errors import InputError


def test_paper_rule_on_an_a100():
    # 163 KiB of shared memory = 83 456 fp16 elements; d = 64: Bc = ⌈83456 / 256⌉ = 326, Br = min(326, 64)
    assert blocks.paper(163 * 1024, 64, 2) == (64, 326)
    assert blocks.paper(1024, 4, 4) == (4, 16)


def test_paper_blocks_do_not_fit_once_s_ij_is_counted():
    q = np.zeros((1024, 64), np.float16) + 0.5
    with pytest.raises(InputError) as e:
        sim.run("flash2", q, q, q, blocks="paper", hardware="A100-40GB")
    message = str(e.value)
    assert "Br=64, Bc=326" in message and "P̃_ij 81.5 KiB" in message and "163.0 KiB" in message


def test_paper_blocks_run_where_they_fit():
    q = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
    r = sim.run("flash1", q, q, q, blocks="paper", sram_bytes=64 * 1024)
    assert (r.block_rows, r.block_cols) == blocks.paper(64 * 1024, 8, 4) == (8, 512)
    assert r.sram_peak_bytes <= 64 * 1024


@pytest.mark.parametrize("algorithm", ["standard", "flash1", "flash2"])
@pytest.mark.parametrize("N,Nk,d,s,M", [(4096, 4096, 64, 2, 163 * 1024), (300, 70, 40, 4, 50_000), (5, 9, 3, 2, 4096)])
def test_fit_is_the_largest_that_fits(algorithm, N, Nk, d, s, M):
    Br, Bc = blocks.fit(algorithm, N, Nk, d, s, M)
    assert blocks.need(algorithm, Br, Bc, d, s) <= M
    assert Br <= N and Bc <= Nk
    grown = {"flash2": (min(2 * Br, N), Bc), "flash1": (Br, min(2 * Bc, Nk))}
    if algorithm in grown and grown[algorithm] != (Br, Bc):  # the traffic-setting block cannot grow
        assert blocks.need(algorithm, *grown[algorithm], d, s) > M
    if algorithm == "standard" and (Br, Bc) != (N, Nk):  # nor can the square
        assert blocks.need(algorithm, min(2 * Br, N), min(2 * Bc, Nk), d, s) > M


def test_fit_on_the_a100_at_the_papers_shape():
    assert blocks.fit("flash2", 1024, 1024, 64, 2, 163 * 1024) == (128, 128)


def test_one_given_block_is_kept_and_the_other_fitted():
    Br, Bc = blocks.fit("flash2", 1000, 1000, 64, 2, 163 * 1024, Br=64)
    assert Br == 64 and blocks.need("flash2", 64, Bc, 64, 2) <= 163 * 1024 < blocks.need("flash2", 64, 2 * Bc, 64, 2)


def test_too_large_d_is_refused_with_sizes():
    with pytest.raises(InputError, match="even the smallest blocks"):
        blocks.fit("flash2", 10, 10, 100_000, 2, 163 * 1024)
