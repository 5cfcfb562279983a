"""Block rules: the paper's Bc = ⌈M/4d⌉, Br = min(Bc, d), whether it fits, and the largest blocks that do."""

import numpy as np
import pytest

import sim
from sim.algorithms import registry
from sim.core.errors import InputError
from sim.machine import blocks


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
    assert blocks.paper(64 * 1024, 8, 4) == (8, 512)
    assert (r.block_rows, r.block_cols) == (8, 64)  # Bc = 512 keys, clamped to the Nk = 64 there are
    assert r.sram_peak_bytes <= 64 * 1024


@pytest.mark.parametrize("algorithm", ["standard", "flash1", "flash2"])
@pytest.mark.parametrize("N,Nk,d,s,M", [(4096, 4096, 64, 2, 163 * 1024), (300, 70, 40, 4, 50_000), (5, 9, 3, 2, 4096)])
def test_fit_is_the_largest_that_fits(algorithm, N, Nk, d, s, M):
    Br, Bc = registry.fit(algorithm, N, Nk, d, s, M)
    assert registry.need(algorithm, Br, Bc, d, s) <= M
    assert Br <= N and Bc <= Nk
    grown = {"flash2": (min(2 * Br, N), Bc), "flash1": (Br, min(2 * Bc, Nk))}
    if algorithm in grown and grown[algorithm] != (Br, Bc):  # the traffic-setting block cannot grow
        assert registry.need(algorithm, *grown[algorithm], d, s) > M
    if algorithm == "standard" and (Br, Bc) != (N, Nk):  # nor can the square
        assert registry.need(algorithm, min(2 * Br, N), min(2 * Bc, Nk), d, s) > M


def test_fit_on_the_a100_at_the_papers_shape():
    assert registry.fit("flash2", 1024, 1024, 64, 2, 163 * 1024) == (128, 128)


def test_one_given_block_is_kept_and_the_other_fitted():
    Br, Bc = registry.fit("flash2", 1000, 1000, 64, 2, 163 * 1024, Br=64)
    assert Br == 64 and registry.need("flash2", 64, Bc, 64, 2) <= 163 * 1024 < registry.need(
        "flash2", 64, 2 * Bc, 64, 2
    )


def test_too_large_d_is_refused_with_sizes():
    with pytest.raises(InputError, match="even the smallest blocks"):
        registry.fit("flash2", 10, 10, 100_000, 2, 163 * 1024)


@pytest.mark.parametrize("splits", [1, 3, 16])
def test_decoding_fit_is_the_largest_power_of_two_under_the_longest_chunk_that_fits(splits):
    Nq, Nk, d, s, M = 4, 5000, 64, 2, 48 * 1024
    Bc = blocks.decoding_fit(Nq, Nk, d, s, M, splits)
    longest = max(k1 - k0 for k0, k1 in blocks.chunks(Nk, splits))
    need = lambda bc: sum(blocks.decoding_footprint(Nq, bc, d, s, splits).values())  # noqa: E731
    assert need(Bc) <= M and Bc <= longest
    assert Bc == longest or need(min(2 * Bc, longest)) > M
    assert blocks.decoding_blocks(Nq, Nk, d, s, M, splits) == Bc


def test_decoding_blocks_keeps_a_given_bc_and_refuses_one_that_does_not_fit():
    assert blocks.decoding_blocks(1, 1000, 64, 2, 163 * 1024, 4, Bc=32) == 32
    with pytest.raises(InputError, match=r"^block_cols: Bc=4096 needs \d+ bytes of SRAM for Flash-Decoding"):
        blocks.decoding_blocks(1, 8192, 64, 2, 16 * 1024, 1, Bc=4096)


def test_choose_applies_the_paper_rule_for_the_backward_and_names_it_when_it_does_not_fit():
    M = 16384
    assert blocks.paper(M, 8, 2) == (8, 256)
    assert registry.choose("flash2", "paper", 64, 64, 8, 2, M, backward=True) == (8, 64)  # no more keys than Nk = 64
    with pytest.raises(InputError) as e:
        registry.choose("flash1", "paper", 4096, 4096, 64, 2, 163 * 1024, backward=True)
    assert str(e.value).startswith("blocks: the paper's rule") and "for the flash1 backward" in str(e.value)
    assert registry.choose("flash2", "paper", 64, 64, 8, 2, M, Br=4) == registry.fit("flash2", 64, 64, 8, 2, M, Br=4)
